// Set-ID bits and file capabilities, dropped when a file's content or owner changes.
import type { LiveEntry } from '../store/entries.js'
import type { KillSetId } from './attr.js'

export const CAPABILITY = 'security.capability'

/**
 * What the kernel's VFS does to a file whose content or owner changes, done here because cpfs
 * negotiates HANDLE_KILLPRIV_V2 (so the kernel need not ask for security.capability on every
 * write): file capabilities always go; when the kernel says the caller lacks CAP_FSETID,
 * set-user-ID goes, and set-group-ID when the file is group-executable or the caller is not in
 * its group (the VFS rule, setattr_should_drop_sgid; the protocol's text states only the first).
 */
export function dropPrivileges (e: LiveEntry, kill: KillSetId | null): boolean {
  const mode = e.mode
  if (e.xattrs?.[CAPABILITY]) {
    const { [CAPABILITY]: _dropped, ...rest } = e.xattrs
    if (Object.keys(rest).length) e.xattrs = rest
    else delete e.xattrs
  }
  if (kill && e.kind !== 'd') {
    e.mode &= ~0o4000
    if (e.mode & 0o2000 && (e.mode & 0o010 || !kill.inGroup(e.gid))) e.mode &= ~0o2000
  }
  return e.mode !== mode
}
