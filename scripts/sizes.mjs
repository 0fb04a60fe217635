// The house's size rules (docs/decisions.md, "Sizes"): TypeScript files in src/ of at most 500
// lines, classes of at most 300, functions of at most 80. Prints one line per breach, e.g.
// "function src/plans/run.ts:finish 81", and exits 1 when there is any.
// Usage: node scripts/sizes.mjs [DIR]   (default: src)
import ts from 'typescript'
import * as fs from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

export const LIMITS = { file: 500, class: 300, function: 80 }

/** The breaches under `root`, as lines. */
export function breaches (root) {
  const out = []
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name < b.name ? -1 : 1)) {
      const p = join(dir, e.name)
      if (e.isDirectory()) walk(p)
      else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) check(p, out)
    }
  }
  walk(root)
  return out
}

function check (p, out) {
  const text = fs.readFileSync(p, 'utf8')
  const sf = ts.createSourceFile(p, text, ts.ScriptTarget.Latest, true)
  const name = relative(process.cwd(), p)
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0)
  if (lines > LIMITS.file) out.push(`file ${name} ${lines}`)
  const visit = (n) => {
    const length = () => sf.getLineAndCharacterOfPosition(n.getEnd()).line - sf.getLineAndCharacterOfPosition(n.getStart()).line + 1
    const label = () => n.name?.getText?.() ?? n.parent?.name?.getText?.() ?? '<anonymous>'
    if (ts.isClassDeclaration(n) && length() > LIMITS.class) out.push(`class ${name}:${label()} ${length()}`)
    const fn = ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n) || ts.isArrowFunction(n) || ts.isFunctionExpression(n) || ts.isConstructorDeclaration(n) || ts.isGetAccessor(n) || ts.isSetAccessor(n)
    if (fn && length() > LIMITS.function) out.push(`function ${name}:${label()} ${length()}`)
    ts.forEachChild(n, visit)
  }
  visit(sf)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const found = breaches(process.argv[2] ?? 'src')
  for (const line of found) console.log(line)
  process.exit(found.length ? 1 : 0)
}
