// `cpfs log --steps`: each step with its turn and how many paths it changed. Read-only.
import type { Session } from '../session/session.js'
import type { StepRecord } from '../session/steps.js'
import { decode } from '../store/codec.js'
import { STEP_PREFIX, prefixEnd } from '../store/keys.js'
import { analyseStep, type StepAnalysis } from '../session/step-analysis.js'

/** One step as `cpfs log --steps` lists it. */
export interface StepListed {
  n: number
  id: string | null
  label: string
  tool: string | null
  turn: number | null
  openedAt: number
  closedAt: number | null
  /** Paths it changed (keys of its layers that its processes changed). */
  files: number
  inHistory: boolean
}

/** The steps, oldest first (the newest `last` of them). */
export async function listSteps (session: Session, last: number): Promise<StepListed[]> {
  const records: StepRecord[] = []
  for await (const [, value] of session.store.entries({ gte: STEP_PREFIX, lt: prefixEnd(STEP_PREFIX) })) records.push(decode<StepRecord>(value))
  const out: StepListed[] = []
  for (const step of records.slice(-last)) {
    const a = await analyseStep(session, step)
    const first = a.layers.findIndex(l => step.parts.includes(l) || l === step.from)
    out.push({
      n: step.n,
      id: step.id ?? null,
      label: step.label,
      tool: step.tool ?? null,
      turn: first >= 0 ? a.turnOf[first] : null,
      openedAt: step.openedAt,
      closedAt: step.closedAt ?? null,
      files: changedFiles(session, a),
      inHistory: a.inHistory
    })
  }
  return out
}

/** How many paths a step changed, not counting directories it only made something in. */
function changedFiles (session: Session, a: StepAnalysis): number {
  let n = 0
  for (const [k, info] of a.keys) {
    const e = session.history.layers.get(a.layers[info.last])?.get(k)
    if (e?.kind === 'd' && e.fresh !== 1) continue
    n++
  }
  return n
}

