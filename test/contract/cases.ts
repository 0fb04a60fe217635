// The filesystem contract: a table from a case's name to what it does and expects, run
// against every filesystem of test/contract/filesystems.ts. Each case starts from the seed
// tree (a.txt, d/{x,y,sub/z}, empty/, link -> a.txt) on a filesystem of its own.
import type { Test } from 'tap'
import type { Filesystem } from './filesystems.js'

export type Case = (t: Test, fs: Filesystem) => Promise<void>

/** The operation fails with errno `code` (and nothing else). */
async function fails (t: Test, what: Promise<unknown>, code: string, label: string): Promise<void> {
  try {
    await what
    t.fail(`${label}: expected ${code}, it succeeded`)
  } catch (err: any) {
    t.equal(err?.code, code, label)
  }
}

const text = async (fs: Filesystem, p: string): Promise<string> => (await fs.readFile(p)).toString()

/**
 * Cases about what the kernel's path walk guarantees before any request reaches a filesystem
 * (every component but the last is a directory): the overlay in process is not asked them.
 */
export const kernelChecked = new Set(['a path through a file is ENOTDIR'])

export const cases: Record<string, Case> = {
  'a file of the lower layer reads as it is': async (t, fs) => {
    t.equal(await text(fs, 'a.txt'), 'alpha\n')
    t.equal((await fs.readFile('d/x')).length, 100_000)
    t.same(await fs.readdir(''), ['a.txt', 'd', 'empty', 'link'])
    t.same(await fs.readdir('d'), ['sub', 'x', 'y'])
  },
  'a new file reads back, with its size and mode': async (t, fs) => {
    await fs.writeFile('new.txt', 'hello', 0o600)
    t.equal(await text(fs, 'new.txt'), 'hello')
    const st = await fs.stat('new.txt')
    t.equal(st.type, 'f')
    t.equal(st.size, 5)
    t.equal(st.perm, 0o600)
    t.same(await fs.readdir(''), ['a.txt', 'd', 'empty', 'link', 'new.txt'])
  },
  'overwriting a lower file replaces all of it': async (t, fs) => {
    await fs.writeFile('d/x', 'short')
    t.equal(await text(fs, 'd/x'), 'short')
    t.equal((await fs.stat('d/x')).size, 5)
  },
  'a write in the middle of a lower file keeps the rest (copy-up)': async (t, fs) => {
    await fs.writeAt('d/x', 'MID', 50_000)
    const b = await fs.readFile('d/x')
    t.equal(b.length, 100_000)
    t.equal(b.subarray(49_999, 50_004).toString(), 'xMIDx')
    t.equal(b.subarray(0, 10).toString(), 'xxxxxxxxxx')
  },
  'append grows a lower file': async (t, fs) => {
    await fs.appendFile('a.txt', 'beta\n')
    t.equal(await text(fs, 'a.txt'), 'alpha\nbeta\n')
  },
  'a write past the end leaves zeros in the gap': async (t, fs) => {
    await fs.writeFile('gap', 'A')
    await fs.writeAt('gap', 'B', 200_000)
    const b = await fs.readFile('gap')
    t.equal(b.length, 200_001)
    t.equal(b[0], 0x41)
    t.equal(b[200_000], 0x42)
    t.ok(b.subarray(1, 200_000).every(c => c === 0), 'the gap reads as zeros')
  },
  'truncate shrinks, then grows with zeros': async (t, fs) => {
    await fs.truncate('a.txt', 2)
    t.equal(await text(fs, 'a.txt'), 'al')
    await fs.truncate('a.txt', 4)
    t.same([...await fs.readFile('a.txt')], [0x61, 0x6c, 0, 0])
  },
  'unlink removes a lower file; a new one of that name is new': async (t, fs) => {
    await fs.unlink('d/y')
    await fails(t, fs.stat('d/y'), 'ENOENT', 'gone after unlink')
    t.same(await fs.readdir('d'), ['sub', 'x'])
    await fs.writeFile('d/y', 'again')
    t.equal(await text(fs, 'd/y'), 'again')
  },
  'unlink of what is not there is ENOENT; of a directory, EISDIR': async (t, fs) => {
    await fails(t, fs.unlink('nope'), 'ENOENT', 'unlink missing')
    await fails(t, fs.unlink('d'), 'EISDIR', 'unlink a directory')
  },
  'mkdir, then rmdir; mkdir of an existing name is EEXIST': async (t, fs) => {
    await fs.mkdir('nd', 0o750)
    const st = await fs.stat('nd')
    t.equal(st.type, 'd')
    t.equal(st.perm, 0o750)
    t.same(await fs.readdir('nd'), [])
    await fails(t, fs.mkdir('nd'), 'EEXIST', 'mkdir twice')
    await fails(t, fs.mkdir('a.txt'), 'EEXIST', 'mkdir over a file')
    await fs.rmdir('nd')
    await fails(t, fs.stat('nd'), 'ENOENT', 'gone after rmdir')
  },
  'rmdir refuses a directory with entries, and a file': async (t, fs) => {
    await fails(t, fs.rmdir('d'), 'ENOTEMPTY', 'rmdir a full directory')
    await fails(t, fs.rmdir('a.txt'), 'ENOTDIR', 'rmdir a file')
    await fs.rmdir('empty')
    t.same(await fs.readdir(''), ['a.txt', 'd', 'link'])
  },
  'a lower directory emptied entry by entry can be removed': async (t, fs) => {
    await fs.unlink('d/sub/z')
    await fs.rmdir('d/sub')
    t.same(await fs.readdir('d'), ['x', 'y'])
  },
  'a path through a file is ENOTDIR': async (t, fs) => {
    await fails(t, fs.stat('a.txt/x'), 'ENOTDIR', 'stat through a file')
    await fails(t, fs.writeFile('a.txt/x', 'no'), 'ENOTDIR', 'create through a file')
  },
  'rename a file over another replaces it': async (t, fs) => {
    await fs.rename('d/y', 'a.txt')
    t.equal(await text(fs, 'a.txt'), 'why\n')
    await fails(t, fs.stat('d/y'), 'ENOENT', 'the old name is gone')
  },
  'rename a lower directory carries everything below it': async (t, fs) => {
    await fs.rename('d', 'moved')
    t.same(await fs.readdir('moved'), ['sub', 'x', 'y'])
    t.equal(await text(fs, 'moved/sub/z'), 'zed\n')
    await fails(t, fs.stat('d'), 'ENOENT', 'the old directory is gone')
    await fs.mkdir('d')
    t.same(await fs.readdir('d'), [], 'a new directory of the old name is empty')
  },
  'rename a directory over an empty one, never over a full one': async (t, fs) => {
    await fails(t, fs.rename('empty', 'd'), 'ENOTEMPTY', 'over a full directory')
    await fs.rename('d/sub', 'empty')
    t.same(await fs.readdir('empty'), ['z'])
  },
  'rename a file over a directory is EISDIR; a directory over a file ENOTDIR': async (t, fs) => {
    await fails(t, fs.rename('a.txt', 'empty'), 'EISDIR', 'file over directory')
    await fails(t, fs.rename('empty', 'a.txt'), 'ENOTDIR', 'directory over file')
  },
  'a symlink reads its target and is not followed by lstat': async (t, fs) => {
    t.equal(await fs.readlink('link'), 'a.txt')
    t.equal((await fs.stat('link')).type, 'l')
    await fs.symlink('d/y', 'l2')
    t.equal(await fs.readlink('l2'), 'd/y')
    t.equal((await fs.stat('l2')).size, 3, 'a symlink\'s size is its target\'s length')
    await fails(t, fs.readlink('a.txt'), 'EINVAL', 'readlink of a file')
  },
  'a hard link shares content and counts links': async (t, fs) => {
    await fs.link('d/y', 'hl')
    t.equal((await fs.stat('hl')).nlink, 2)
    t.equal((await fs.stat('d/y')).ino, (await fs.stat('hl')).ino, 'one inode')
    await fs.writeAt('hl', 'W', 0)
    t.equal(await text(fs, 'd/y'), 'Why\n', 'a write through one name shows through the other')
    await fs.unlink('d/y')
    t.equal((await fs.stat('hl')).nlink, 1)
    t.equal(await text(fs, 'hl'), 'Why\n')
  },
  'chmod changes the permission bits only': async (t, fs) => {
    await fs.chmod('a.txt', 0o640)
    const st = await fs.stat('a.txt')
    t.equal(st.perm, 0o640)
    t.equal(st.type, 'f')
    t.equal(await text(fs, 'a.txt'), 'alpha\n')
  },
  'many files in one directory all list and read': async (t, fs) => {
    for (let i = 0; i < 200; i++) await fs.writeFile(`d/f${i}`, String(i))
    const names = await fs.readdir('d')
    t.equal(names.length, 203)
    t.equal(await text(fs, 'd/f137'), '137')
  }
}
