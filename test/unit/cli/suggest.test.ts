// "Did you mean ...?" (src/cli/suggest.ts): other tools' names, typos, unique prefixes, and
// silence for a word that is not close to any command.
import t from 'tap'
import { suggest } from '../../../src/cli/suggest.js'

const NAMES = ['mount', 'turn', 'log', 'rewind', 'diff', 'restore', 'exec', 'hook', 'mcp', 'prune', 'forget', 'fork', 'undo', 'redo', 'status', 'fsck', 'unmount']

t.test('names from other tools map to cpfs commands', async t => {
  t.equal(suggest('umount', NAMES), 'unmount')
  t.equal(suggest('commit', NAMES), 'turn')
  t.equal(suggest('checkout', NAMES), 'rewind')
  t.equal(suggest('GC', NAMES), 'prune', 'in any case')
  t.equal(suggest('ls', ['status']), null, 'not when the command it maps to is not offered')
})

t.test('typos: an edit or a swap of neighbours, more for a longer word', async t => {
  t.equal(suggest('rewnid', NAMES), 'rewind', 'two letters swapped')
  t.equal(suggest('stauts', NAMES), 'status')
  t.equal(suggest('mont', NAMES), 'mount', 'a letter missing')
  t.equal(suggest('diffs', NAMES), 'diff', 'a letter more')
  t.equal(suggest('restroe', NAMES), 'restore')
})

t.test('a unique prefix of two letters or more', async t => {
  t.equal(suggest('stat', NAMES), 'status')
  t.equal(suggest('fs', NAMES), 'fsck')
  t.equal(suggest('re', NAMES), null, 'three commands start with re: no guess')
})

t.test('a word far from every command gets no suggestion', async t => {
  t.equal(suggest('banana', NAMES), null)
  t.equal(suggest('x', NAMES), null)
  t.equal(suggest('', []), null)
})
