// The views plans compare: the layers of a stack (loaded once, then kept by the session), the
// view they make over the real directory, and what moving the real directory from the applied
// stack to another one touches.
import { View } from '../overlay/view.js'
import type { Session } from '../session/session.js'
import type { Entry } from '../store/entries.js'
import { touchedPaths } from './planner.js'

/** The layers of `stack`, in order, loaded through the history (which keeps them). */
export async function layersOf (session: Session, stack: number[]): Promise<Array<Map<string, Entry>>> {
  await session.history.load(stack)
  return session.history.entriesOf(stack)
}

/** The view of `stack` over the real directory. */
export async function viewOf (session: Session, stack: number[]): Promise<View> {
  return View.build(session.lower, await layersOf(session, stack))
}

/** The expected, target and touched paths for moving the real directory to `stack`. */
export async function realToStack (session: Session, stack: number[]): Promise<{ expected: View, target: View, touched: Set<string> }> {
  const applied = session.meta.applied
  let cp = 0
  while (cp < stack.length && cp < applied.length && stack[cp] === applied[cp]) cp++
  return {
    expected: await viewOf(session, applied),
    target: await viewOf(session, stack),
    touched: touchedPaths(await layersOf(session, stack.slice(cp)), await layersOf(session, applied.slice(cp)))
  }
}
