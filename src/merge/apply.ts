// Making a merge plan through an overlay: each op is an ordinary overlay change of the head
// layer (restore from theirs' view, a chmod, a rewrite), recorded like any write. Synchronous:
// run in one step on the daemon's thread, no FUSE request lands between the plan and its end.
import * as fs from 'node:fs'
import type { Overlay } from '../overlay/overlay.js'
import type { View } from '../overlay/view.js'
import type { MergeOp } from './plan.js'

export function applyMerge (ov: Overlay, ops: MergeOp[], theirs: View): void {
  for (const op of ops) {
    if (op.op === 'take') ov.restore(op.path, theirs)
    else if (op.op === 'mode') ov.setattr(op.path, null, { mode: op.mode })
    else rewrite(ov, op.path, op.data, op.mode)
  }
}

function rewrite (ov: Overlay, p: string, data: Buffer, mode: number): void {
  ov.truncate(p, 0)
  const fh = ov.open(p, fs.constants.O_WRONLY)
  try {
    if (data.length) ov.write(fh, data, data.length, 0)
  } finally {
    ov.release(fh)
  }
  if ((ov.getattr(p).mode & 0o7777) !== mode) ov.setattr(p, null, { mode })
}
