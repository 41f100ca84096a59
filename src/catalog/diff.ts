/**
 * What `mcp-edge pin --check` reports (docs/catalog.md §Pinning): per definition (and per
 * server's instructions), whether a backend added, removed or changed it since the lock was
 * written, and for a change a line diff of the model view's YAML text, which is what a reviewer
 * reads in the lock.
 */
import type { CatalogKind, PinnedKind } from './definition.js'
import { type CatalogLock, type LockedDefinition, readingOrder, renderYaml } from './lock.js'

interface DefinitionChange {
  readonly server: string
  readonly kind: PinnedKind
  /** The backend's name; for instructions, the server's one set of them (`instructions`). */
  readonly name: string
  readonly change: 'added' | 'removed' | 'changed'
  /** In the lock (removed, changed). */
  readonly locked?: LockedDefinition | undefined
  /** What the backend lists now (added, changed). */
  readonly current?: LockedDefinition | undefined
}

const KINDS: readonly (CatalogKind | 'skills')[] = ['tools', 'prompts', 'skills']
const EMPTY = new Map<string, LockedDefinition>()

/**
 * The differences between a lock and what the servers list now, sorted by server, kind, name.
 * `servers` limits the comparison (`pin --check --server`); by default every server of either.
 */
export function compareCatalogs(
  locked: CatalogLock,
  current: CatalogLock,
  servers?: readonly string[],
): DefinitionChange[] {
  const names = servers ?? [...new Set([...locked.servers.keys(), ...current.servers.keys()])]
  const out: DefinitionChange[] = []
  for (const server of [...names].sort()) {
    const was = locked.servers.get(server)
    const now = current.servers.get(server)
    const l = was?.instructions
    const c = now?.instructions
    if (l?.digest !== c?.digest) {
      const change = l === undefined ? 'added' : c === undefined ? 'removed' : 'changed'
      out.push({
        server,
        kind: 'instructions',
        name: 'instructions',
        change,
        locked: l,
        current: c,
      })
    }
    for (const kind of KINDS) {
      const before = was?.[kind] ?? EMPTY
      const after = now?.[kind] ?? EMPTY
      for (const name of [...new Set([...before.keys(), ...after.keys()])].sort()) {
        const l = before.get(name)
        const c = after.get(name)
        if (l !== undefined && c !== undefined && l.digest === c.digest) continue
        const change = l === undefined ? 'added' : c === undefined ? 'removed' : 'changed'
        out.push({ server, kind, name, change, locked: l, current: c })
      }
    }
  }
  return out
}

/** How a report is written: ANSI colours only for a terminal. */
interface ReportStyle {
  readonly color: boolean
}

const SINGULAR: Readonly<Record<CatalogKind | 'skills', string>> = {
  tools: 'tool',
  prompts: 'prompt',
  skills: 'skill',
}

/** `tool "get_forecast"`, `skill "skill://refunds/SKILL.md"`, or `instructions` (one set). */
function subject(c: DefinitionChange): string {
  return c.kind === 'instructions'
    ? 'instructions'
    : `${SINGULAR[c.kind]} ${JSON.stringify(c.name)}`
}
/** Unchanged lines kept around a change. */
const CONTEXT = 3

/** A readable report, one block per change. */
export function renderChanges(changes: readonly DefinitionChange[], style: ReportStyle): string {
  const paint = (code: string, s: string): string => (style.color ? `\x1b[${code}m${s}\x1b[0m` : s)
  let out = ''
  for (const c of changes) {
    out += `${paint('1', `${c.server}: ${subject(c)} ${c.change}`)}\n`
    const before = c.locked === undefined ? [] : textLines(c.kind, c.locked)
    const after = c.current === undefined ? [] : textLines(c.kind, c.current)
    for (const line of diffLines(before, after, c.change === 'changed' ? CONTEXT : Infinity)) {
      if (line.op === '-') out += `${paint('31', `  - ${line.text}`)}\n`
      else if (line.op === '+') out += `${paint('32', `  + ${line.text}`)}\n`
      else if (line.op === '…') out += `${paint('2', '    …')}\n`
      else out += `    ${line.text}\n`
    }
  }
  return out
}

function textLines(kind: PinnedKind, d: LockedDefinition): string[] {
  return renderYaml(readingOrder(kind, d.definition)).replace(/\n$/, '').split('\n')
}

/** One line of a diff: kept (' '), removed, added, or a run of kept lines left out ('…'). */
interface DiffLine {
  readonly op: ' ' | '-' | '+' | '…'
  readonly text: string
}

/** Above this many cells the LCS table costs too much: the whole text is shown as replaced. */
const MAX_CELLS = 4_000_000

/**
 * A line diff by longest common subsequence, with `context` kept lines around each change (the
 * rest folded into one '…' line). Definitions are a few dozen lines, so the quadratic table is
 * cheap; past MAX_CELLS the old text is shown removed and the new one added.
 */
export function diffLines(a: readonly string[], b: readonly string[], context: number): DiffLine[] {
  const all: DiffLine[] = []
  if (a.length * b.length > MAX_CELLS) {
    for (const text of a) all.push({ op: '-', text })
    for (const text of b) all.push({ op: '+', text })
    return all
  }
  // lcs[i][j]: length of the LCS of a[i..] and b[j..]
  const w = b.length + 1
  const lcs = new Uint32Array((a.length + 1) * w)
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i * w + j] =
        a[i] === b[j]
          ? (lcs[(i + 1) * w + j + 1] as number) + 1
          : Math.max(lcs[(i + 1) * w + j] as number, lcs[i * w + j + 1] as number)
    }
  }
  let i = 0
  let j = 0
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      all.push({ op: ' ', text: a[i++] as string })
      j++
    } else if (
      i < a.length &&
      (j === b.length || (lcs[(i + 1) * w + j] as number) >= (lcs[i * w + j + 1] as number))
    ) {
      all.push({ op: '-', text: a[i++] as string }) // removed lines first, as diff -u does
    } else {
      all.push({ op: '+', text: b[j++] as string })
    }
  }
  return fold(all, context)
}

/** Keeps `context` unchanged lines on either side of each change; folds longer runs into '…'. */
function fold(lines: readonly DiffLine[], context: number): DiffLine[] {
  if (!Number.isFinite(context)) return [...lines]
  const near = new Array<boolean>(lines.length).fill(false)
  lines.forEach((l, k) => {
    if (l.op === ' ') return
    for (let d = Math.max(0, k - context); d <= Math.min(lines.length - 1, k + context); d++)
      near[d] = true
  })
  const out: DiffLine[] = []
  for (let k = 0; k < lines.length; k++) {
    if (near[k]) out.push(lines[k] as DiffLine)
    else if (out.at(-1)?.op !== '…') out.push({ op: '…', text: '' })
  }
  return out
}
