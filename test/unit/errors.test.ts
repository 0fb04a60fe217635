// Errors (src/errors.ts): a stable code, the CLI's one-line form, filesystem errors without a
// stack, and recognition across two copies of the module (the bundled CLI loads both).
import t from 'tap'
import { CpfsError, FsError, fsError, isCpfsError } from '../../src/errors.js'

t.test('a CpfsError carries its code, hint and cause; its line is what the CLI prints', async t => {
  const cause = new Error('low level')
  const e = new CpfsError('NOT_RUNNING', 'nothing is mounted at /w', 'run cpfs mount /w', { cause })
  t.equal(e.code, 'NOT_RUNNING')
  t.equal(e.name, 'CpfsError')
  t.equal(e.cause, cause)
  t.equal(e.line(), 'cpfs: nothing is mounted at /w (run cpfs mount /w)')
  t.equal(new CpfsError('X', 'plain').line(), 'cpfs: plain', 'no hint, no parentheses')
  t.ok(e instanceof Error)
})

t.test('filesystem errors name the path, and carry no stack trace', async t => {
  const e = fsError('ENOENT', '/a/b', 'while renaming')
  t.ok(e instanceof FsError)
  t.equal(e.code, 'ENOENT')
  t.equal(e.message, 'ENOENT: /a/b: while renaming')
  t.equal(fsError('EEXIST', '/x').message, 'EEXIST: /x')
  t.notMatch(e.stack ?? '', /\n\s+at /, 'no frames')
  t.match(new FsError('EIO', '/a').stack ?? '', /\n\s+at /, 'the class itself keeps them')
  t.ok(Error.stackTraceLimit > 0, 'the limit is put back')
})

t.test('isCpfsError: this module\'s errors, another copy\'s, and nothing else', async t => {
  t.ok(isCpfsError(new CpfsError('A', 'a')))
  t.ok(isCpfsError(fsError('EIO', '/')))
  // Another copy of the module: another class, the same shared mark.
  const foreign = Object.defineProperty(new Error('from the other copy'), Symbol.for('cpfs.error'), { get: () => true })
  t.ok(isCpfsError(foreign))
  t.notOk(isCpfsError(Object.assign(new Error('x'), { code: 'ENOENT' })), 'a node error with a code is not one')
  t.notOk(isCpfsError(null))
  t.notOk(isCpfsError('CpfsError'))
})
