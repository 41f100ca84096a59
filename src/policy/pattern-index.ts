import { compilePattern, type Matcher } from '../match/pattern.js'

/**
 * Which of many patterns match a name, without trying each (docs/policy.md §What a rule costs):
 * literal names in a Map, `*` alone in one list, and the other patterns grouped by their literal
 * head (or, when they start with `*`, their literal tail) in a sorted prefix table, so a lookup
 * tries only the patterns whose head the name starts with. Each candidate is then confirmed by
 * the one matcher of match/pattern.ts, so the index can only narrow the patterns tried, never
 * change what matches.
 */

/** A pattern with a `*` other than `*` alone, and what it was added for. */
interface Glob {
  readonly id: number
  readonly match: Matcher
}

/** Patterns of one kind of name (tool names, client ids, …), each added with a number (its rule). */
export class PatternIndex {
  private readonly exact = new Map<string, number[]>()
  private readonly everything: number[] = []
  /** Globs by their literal head (the text before the first `*`), non-empty. */
  private readonly heads = new Map<string, Glob[]>()
  /** The distinct lengths of those heads, ascending: one Map lookup per length. */
  private headLengths: number[] = []
  /** Globs that start with `*`, by their literal tail (the text after the last `*`), non-empty. */
  private readonly tails = new Map<string, Glob[]>()
  private tailLengths: number[] = []
  /** Globs with neither head nor tail (`*a*b*`): few in practice, each tried. */
  private readonly loose: Glob[] = []
  private size = 0

  /** Adds `pattern` for `id`. Ids must be added in ascending order (rule order). */
  add(pattern: string, id: number): void {
    this.size++
    const first = pattern.indexOf('*')
    if (first === -1) {
      append(this.exact, pattern, id)
      return
    }
    const last = pattern.lastIndexOf('*')
    const head = pattern.slice(0, first)
    const tail = pattern.slice(last + 1)
    const middle = pattern.slice(first, last + 1)
    if (head === '' && tail === '' && /^\*+$/.test(middle)) {
      pushOnce(this.everything, id)
      return
    }
    const glob = { id, match: compilePattern(pattern) }
    if (head !== '') {
      appendGlob(this.heads, head, glob)
      this.headLengths = withLength(this.headLengths, head.length)
    } else if (tail !== '') {
      appendGlob(this.tails, tail, glob)
      this.tailLengths = withLength(this.tailLengths, tail.length)
    } else this.loose.push(glob)
  }

  /** Whether no pattern was added. */
  get empty(): boolean {
    return this.size === 0
  }

  /** The ids of the patterns `value` matches: ascending, each once. */
  lookup(value: string): readonly number[] {
    const exact = this.exact.get(value)
    let found: number[] | undefined
    let sources = 0
    if (exact !== undefined) {
      found = exact
      sources++
    }
    if (this.everything.length > 0) {
      found = sources === 0 ? this.everything : [...(found as number[]), ...this.everything]
      sources++
    }
    const more: number[] = []
    for (const length of this.headLengths) {
      if (length > value.length) break
      const globs = this.heads.get(value.slice(0, length))
      if (globs !== undefined) matching(globs, value, more)
    }
    for (const length of this.tailLengths) {
      if (length > value.length) break
      const globs = this.tails.get(value.slice(value.length - length))
      if (globs !== undefined) matching(globs, value, more)
    }
    matching(this.loose, value, more)
    if (more.length === 0 && sources < 2) return found ?? NONE
    if (sources === 0 && more.length === 1) return more
    return ascendingOnce(found === undefined ? more : [...found, ...more])
  }
}

const NONE: readonly number[] = Object.freeze([])

function matching(globs: readonly Glob[], value: string, out: number[]): void {
  for (const g of globs) if (g.match(value)) out.push(g.id)
}

function append(map: Map<string, number[]>, key: string, id: number): void {
  const list = map.get(key)
  if (list === undefined) map.set(key, [id])
  else pushOnce(list, id)
}

function appendGlob(map: Map<string, Glob[]>, key: string, glob: Glob): void {
  const list = map.get(key)
  if (list === undefined) map.set(key, [glob])
  else list.push(glob)
}

/** Ids arrive in ascending order, so a repeat (two patterns of one rule) is the last one. */
function pushOnce(list: number[], id: number): void {
  if (list[list.length - 1] !== id) list.push(id)
}

function withLength(lengths: number[], length: number): number[] {
  if (lengths.includes(length)) return lengths
  return [...lengths, length].sort((a, b) => a - b)
}

/** `ids` sorted ascending with repeats removed (a rule whose several patterns match). */
export function ascendingOnce(ids: number[]): number[] {
  ids.sort((a, b) => a - b)
  let kept = 0
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as number
    if (kept === 0 || ids[kept - 1] !== id) ids[kept++] = id
  }
  ids.length = kept
  return ids
}
