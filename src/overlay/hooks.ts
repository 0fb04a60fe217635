// What the overlay tells its owner (the session), and asks of it: persistence, inode numbers,
// room in the store.

export interface OverlayHooks {
  /** A head-layer path changed (set or deleted). */
  onChange: (path: string) => void
  /** Allocate an inode number for a new file, directory or symlink. */
  allocIno: () => number
  /** Throws ENOSPC when the store cannot take more data. */
  checkSpace: (bytes: number) => void
  /** Data was written into the file at this head path (its entry changed too: size, times). */
  onData?: (path: string) => void
  /** The last handle of a file was closed. */
  onLastClose?: () => void
  /** The content of an untouched lower file is about to change (its first write, truncate...). */
  onCopyUp?: (lowerPath: string, size: number) => void
}
