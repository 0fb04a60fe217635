// An open file: the state its handles share, and the chunks written through them and not yet
// hashed into the store. Open files are nodes keyed by where their state lives: their current
// path, or the inode record of a file with several names (hard links), so a write through any
// name reaches one node. Renames move path-keyed nodes; losing the last name detaches a node,
// so it stays readable and writable through its handles.
import type { FileEntry } from '../store/entries.js'

export class FileNode {
  /** Where its state lives: its path, or the inode record's key (#ino); null once it has no name. */
  key: string | null
  /** The upper entry holding this file's state; null while it is the untouched lower file. */
  entry: FileEntry | null
  lowerPath: string | null
  readonly dirty = new Map<number, Buffer>()
  /** The entry's size when its dirty chunks were last hashed in (FileData.flushNode). */
  hashedSize = -1
  opens = 0
  stale = false

  constructor (key: string, entry: FileEntry | null, lowerPath: string | null) {
    this.key = key
    this.entry = entry
    this.lowerPath = lowerPath
  }

  /** For messages. */
  get label (): string {
    return this.key ?? '(unlinked)'
  }
}
