// cpfs as a library: `import { mount, turn, rewind, ... } from 'cpfs'`.
export { mount, unmount, turn, log, rewind, rewindPreview, diff, restore, fork, undo, redo, status } from './api.js'
export type { RewindPreview } from './plans/preview.js'
export type { Change } from './plans/changes.js'
export type { Target, MountOptions, UnmountResult, RewindResult, RestoreResult, ForkResult, StatusInfo } from './api.js'
export type { TurnInfo } from './session/session.js'
export type { PlanSummary } from './plans/run.js'
export type { ReadyInfo } from './daemon/daemon.js'
export { CpfsError } from './errors.js'
