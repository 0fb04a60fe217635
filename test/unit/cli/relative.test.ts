// `cpfs rewind -1` (src/cli/relative.ts): node's parseArgs takes "-1" for an unknown option;
// hidden first and given back after, it reaches the command as the argument the user typed.
import t from 'tap'
import { parseArgs } from 'node:util'
import { hideRelativeTurns, unhide } from '../../../src/cli/relative.js'

const parse = (args: string[]) => parseArgs({ args, allowPositionals: true, strict: true, options: { store: { type: 'string' }, json: { type: 'boolean' } } })

t.test('a -N argument passes parseArgs as a positional and comes back as typed', async t => {
  t.throws(() => parse(['-1']), 'parseArgs alone refuses it')
  const { positionals, values } = parse(hideRelativeTurns(['-2', '--store', '/s', '--json']))
  t.same(positionals.map(unhide), ['-2'])
  t.equal(unhide(values.store), '/s')
  t.equal(values.json, true)
})

t.test('only -N is hidden; everything else is left as it is', async t => {
  t.same(hideRelativeTurns(['-x', '--1', '-1a', '3', 'msg_1', '-10']).map(unhide), ['-x', '--1', '-1a', '3', 'msg_1', '-10'])
  t.same(hideRelativeTurns(['-x', '--1', '-1a', '3']), ['-x', '--1', '-1a', '3'], 'not even marked')
  t.not(hideRelativeTurns(['-10'])[0], '-10', 'marked')
  t.equal(unhide(true), true, 'non-strings pass through')
  t.equal(unhide(undefined), undefined)
})
