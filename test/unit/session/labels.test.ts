// Turn labels (src/session/labels.ts): a prompt or message may hold terminal escapes; what is
// stored and shown has none. Ids name one turn each: never a number, never a range.
import t from 'tap'
import { checkId, displayLine, neutralise } from '../../../src/session/labels.js'

t.test('escape sequences are removed, other controls replaced', async t => {
  t.equal(neutralise('a\x1b[31mred\x1b[0m b'), 'ared b', 'CSI colours')
  t.equal(neutralise('x\x1b]0;new title\x07y'), 'xy', 'OSC retitling, ended by BEL')
  t.equal(neutralise('x\x1b]8;;http://e\x1b\\link\x1b]8;;\x1b\\y'), 'xlinky', 'OSC hyperlinks, ended by ST')
  t.equal(neutralise('x\x9b2Jy'), 'xy', 'the 8-bit CSI')
  t.equal(neutralise('a\x00b\x07c\x7fd'), 'a\ufffdb\ufffdc\ufffdd', 'NUL, BEL and DEL made visible')
  t.equal(neutralise('a\tb'), 'a b', 'a tab is a space')
  t.equal(neutralise('line 1\r\nline 2'), 'line 1\nline 2', 'newlines kept, CRLF as LF')
  t.equal(neutralise('line 1\nline 2', false), 'line 1 line 2', 'one line when asked')
  t.equal(neutralise('a\rb'), 'a\ufffdb', 'a lone CR would overwrite the line')
  t.equal(neutralise('é 😀 ü'), 'é 😀 ü', 'text is left alone')
})

t.test('displayLine: one line, for a terminal', async t => {
  t.equal(displayLine(null), '')
  t.equal(displayLine(undefined), '')
  t.equal(displayLine('a\nb\x1b[2Kc'), 'a bc')
})

t.test('ids: trimmed, refused with the reason', async t => {
  t.equal(checkId('  msg_0142 '), 'msg_0142')
  t.equal(checkId('toolu_01ABC-x.y'), 'toolu_01ABC-x.y')
  const refused: Array<[string, RegExp]> = [
    ['', /is empty/],
    ['42', /is a number/],
    ['-3', /is a number/],
    ['a..b', /turn range/],
    ['a b', /spaces or control/],
    ['a\x1b[31m', /spaces or control/],
    ['x'.repeat(201), /longer than 200 bytes/]
  ]
  for (const [id, why] of refused) t.throws(() => checkId(id), { code: 'BAD_ID', message: why }, JSON.stringify(id))
  t.equal(checkId('é'.repeat(100)), 'é'.repeat(100), '200 bytes is allowed')
  t.throws(() => checkId('é'.repeat(101)), { code: 'BAD_ID' }, 'bytes are counted, not characters')
})
