import {
  type Alias,
  isMap,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  visit,
  type Document,
  type Node,
  type Pair,
} from 'yaml'

/**
 * Where a problem of a YAML file (the config, a policy file) is, so that `mcp-edge check` and
 * `serve` can print `file:line:column` and the lines around it, as compilers do. The one-line
 * problem texts stay what they were (`servers.weather.colour: unknown key`): readiness warnings,
 * the status page and logs carry those; the position is for the terminal.
 */

/** A 1-based line and column in a file, and how many characters the problem spans on that line. */
export interface Position {
  readonly line: number
  readonly column: number
  readonly length: number
}

/** One problem, with the file and place it is about when they are known. */
export interface LocatedProblem {
  /** The problem on one line, as readiness warnings, the status page and logs carry it. */
  readonly text: string
  readonly file?: string | undefined
  readonly at?: Position | undefined
  /** What follows `file:line:column:` when printed (`text` without the file it names). */
  readonly message?: string | undefined
  /** The file's lines around `at`, with a caret line under the problem. */
  readonly frame?: string | undefined
}

/** A YAML text parsed once for its values and for the positions of its nodes. */
export interface YamlSource {
  readonly text: string
  readonly doc: Document
  readonly lines: LineCounter
  /** The syntax errors and duplicate keys, each with its position, in file order. */
  readonly errors: readonly YamlError[]
}

/** A syntax error or duplicate key: `text` names its line and column, `message` does not. */
interface YamlError {
  readonly text: string
  readonly message: string
  readonly at: Position
}

/** Parses `text`; syntax errors and duplicate keys are collected, not thrown. */
export function parseYamlSource(text: string): YamlSource {
  const lines = new LineCounter()
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, lineCounter: lines })
  const errors = doc.errors.map((e) => {
    const at = position(lines, text, e.pos[0], e.pos[1])
    if (e.code !== 'DUPLICATE_KEY') {
      // prettyErrors: false gives the bare message; the position is added the same way for all.
      const message = `yaml: ${e.message.replace(/\s+at line \d+, column \d+:[\s\S]*$/, '')}`
      return { text: `${message} (line ${at.line}, column ${at.column})`, message, at }
    }
    return duplicateKey(doc, lines, text, e.pos[0], at)
  })
  if (errors.length === 0) errors.push(...aliasErrors(doc, lines, text))
  return { text, doc, lines, errors }
}

/**
 * The aliases `yaml` parses but cannot turn into values: one naming no anchor before it (toJS
 * throws), one inside the node it names (a value that contains itself, which every reader of
 * the value would follow forever), and aliases that expand too far (toJS throws, its guard
 * against a file that grows a billion times as it is read). Each is a problem at its alias.
 */
export function aliasErrors(doc: Document, lines: LineCounter, text: string): YamlError[] {
  const errors: YamlError[] = []
  let first: Alias | undefined
  const add = (alias: Alias, message: string): void => {
    const [start, end] = alias.range ?? [0, 0]
    const at = position(lines, text, start, end)
    errors.push({ text: `${message} (line ${at.line}, column ${at.column})`, message, at })
  }
  visit(doc, {
    Alias(_, alias, path) {
      first ??= alias
      const target = alias.resolve(doc)
      if (target === undefined) add(alias, `yaml: alias *${alias.source} names no anchor before it`)
      else if (path.includes(target))
        add(alias, `yaml: alias *${alias.source} is inside the node it names`)
    },
  })
  if (errors.length > 0 || first === undefined) return errors
  // Only a file with aliases is turned into values here, once more than its reader will.
  try {
    doc.toJS()
  } catch (err) {
    add(first, `yaml: ${(err as Error).message}`)
  }
  return errors
}

/** "duplicate key "name" (line 3, column 5; first at line 2, column 5)", naming the key. */
function duplicateKey(
  doc: Document,
  lines: LineCounter,
  text: string,
  offset: number,
  fallback: Position,
): YamlError {
  let found: { name: string; at: Position; first: Position | undefined } | undefined
  visit(doc, {
    Map(_, map) {
      const seen = new Map<string, Pair>()
      for (const pair of map.items) {
        const key = keyText(pair)
        const range = isScalar(pair.key) ? (pair.key.range ?? undefined) : undefined
        if (key !== undefined && range !== undefined && range[0] === offset) {
          const first = seen.get(key)
          const firstRange = isScalar(first?.key) ? (first.key.range ?? undefined) : undefined
          found = {
            name: key,
            at: position(lines, text, range[0], range[1]),
            first:
              firstRange === undefined
                ? undefined
                : position(lines, text, firstRange[0], firstRange[1]),
          }
          return visit.BREAK
        }
        if (key !== undefined && !seen.has(key)) seen.set(key, pair)
      }
      return undefined
    },
  })
  const f = found
  const message =
    f === undefined
      ? 'yaml: a key appears twice in one mapping'
      : `yaml: duplicate key ${JSON.stringify(f.name)}`
  const at = f?.at ?? fallback
  const first =
    f?.first === undefined ? '' : `first at line ${f.first.line}, column ${f.first.column}`
  return {
    text: `${message} (line ${at.line}, column ${at.column}${first === '' ? '' : `; ${first}`})`,
    message: first === '' ? message : `${message} (${first})`,
    at,
  }
}

function keyText(pair: Pair): string | undefined {
  return isScalar(pair.key) ? String(pair.key.value) : undefined
}

function position(lines: LineCounter, text: string, start: number, end: number): Position {
  const { line, col } = lines.linePos(start)
  const lineEnd = text.indexOf('\n', start)
  const stop = Math.min(end, lineEnd === -1 ? text.length : lineEnd)
  return { line, column: col, length: Math.max(1, stop - start) }
}

/**
 * The position a problem's path names (`servers.weather.upstreams[0].url`): the value when it is
 * a scalar, else its key (where `key:` is written). A path may name keys holding dots (a server
 * `api.v2`), so each step takes the key of the mapping that the rest of the path starts with.
 * Steps the file does not have (a required key left out) stop at the deepest node it has.
 * `key: true` points at the key itself (an unknown key).
 */
export function locatePath(
  source: YamlSource,
  path: string,
  { key = false }: { readonly key?: boolean } = {},
): Position | undefined {
  let node: unknown = source.doc.contents
  let keyNode: Node | undefined
  let rest = path === '(root)' ? '' : path
  while (rest.length > 0) {
    if (rest.startsWith('.')) rest = rest.slice(1)
    const index = /^\[(\d+)\]/.exec(rest)
    if (index !== null && isSeq(node)) {
      const next = node.items[Number(index[1])]
      if (next === undefined) break
      node = next
      keyNode = undefined
      rest = rest.slice(index[0].length)
      continue
    }
    if (!isMap(node)) break
    const pair = longestKey(node.items, rest)
    if (pair === undefined) break
    node = pair.value
    keyNode = pair.key as Node
    rest = rest.slice(String((pair.key as { value: unknown }).value).length)
  }
  const target = (key || !isScalar(node)) && keyNode !== undefined ? keyNode : node
  const range = (target as Node | null | undefined)?.range
  if (range === undefined || range === null) return undefined
  return position(source.lines, source.text, range[0], range[1])
}

/** The pair whose key the path starts with, followed by `.`, `[` or its end; the longest such. */
function longestKey(items: readonly Pair[], rest: string): Pair | undefined {
  let best: Pair | undefined
  let length = -1
  for (const pair of items) {
    if (!isPair(pair) || !isScalar(pair.key)) continue
    const k = String(pair.key.value)
    const after = rest.charAt(k.length)
    if (
      rest.startsWith(k) &&
      (after === '' || after === '.' || after === '[') &&
      k.length > length
    ) {
      best = pair
      length = k.length
    }
  }
  return best
}

/** The path a problem text starts with (`servers.a.requiredScopes: needs auth` → its path). */
export function problemPath(text: string): string | undefined {
  const colon = text.indexOf(': ')
  return colon <= 0 ? undefined : text.slice(0, colon)
}

/** The line before, the line itself and a caret line under the problem, numbered. */
function codeFrame(text: string, at: Position): string {
  const lines = text.split(/\r?\n/)
  const width = String(at.line).length
  const out: string[] = []
  for (let n = Math.max(1, at.line - 1); n <= Math.min(lines.length, at.line); n++) {
    const mark = n === at.line ? '>' : ' '
    out.push(`${mark} ${String(n).padStart(width)} | ${lines[n - 1] ?? ''}`)
  }
  const carets = '^'.repeat(Math.max(1, at.length))
  out.push(`  ${' '.repeat(width)} | ${' '.repeat(Math.max(0, at.column - 1))}${carets}`)
  return out.join('\n')
}

/**
 * `text` placed in `file` at `at`, with its frame; `message` is what the text says after the file
 * it names, if it names one. Only the text when the place is not known.
 */
export function located(
  text: string,
  where: { readonly file: string | undefined; readonly source: YamlSource | undefined },
  at: Position | undefined,
  message?: string,
): LocatedProblem {
  const { file, source } = where
  if (at === undefined || source === undefined || file === undefined) return { text }
  return { text, file, at, message, frame: codeFrame(source.text, at) }
}

/** How a problem is printed in a terminal: `file:line:column: message` and its frame. */
export function renderLocated(p: LocatedProblem): string {
  if (p.at === undefined || p.file === undefined) return p.text
  const head = `${p.file}:${p.at.line}:${p.at.column}: ${p.message ?? p.text}`
  return p.frame === undefined ? head : `${head}\n${p.frame}`
}
