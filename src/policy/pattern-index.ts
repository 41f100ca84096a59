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
  /**
   * Undefined when the pattern is its head or tail and `*`s only (`get_*`, `*_forecast`): the
   * name is then matched by being filed under that head or tail, with nothing more to try.
   */
  readonly match: Matcher | undefined
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
    const bare = /^\*+$/.test(middle) && (head === '' || tail === '')
    const glob = { id, match: bare ? undefined : compilePattern(pattern) }
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
    for (const length of this.headLengths) {
      if (length > value.length) break
      const globs = this.heads.get(value.slice(0, length))
      if (globs !== undefined) found = matching(globs, value, found)
    }
    for (const length of this.tailLengths) {
      if (length > value.length) break
      const globs = this.tails.get(value.slice(value.length - length))
      if (globs !== undefined) found = matching(globs, value, found)
    }
    if (this.loose.length > 0) found = matching(this.loose, value, found)
    const everything = this.everything.length > 0 ? this.everything : undefined
    // Most lookups hit one source, whose list is already ascending and repeat-free.
    if (found === undefined) {
      if (everything === undefined) return exact ?? NONE
      if (exact === undefined) return everything
      return ascendingOnce([...exact, ...everything])
    }
    if (exact !== undefined) found.push(...exact)
    if (everything !== undefined) found.push(...everything)
    return ascendingOnce(found)
  }
}

const NONE: readonly number[] = Object.freeze([])

/** Appends the ids of the globs that match `value` to `out` (made when the first one does). */
function matching(
  globs: readonly Glob[],
  value: string,
  out: number[] | undefined,
): number[] | undefined {
  for (const g of globs) if (g.match === undefined || g.match(value)) (out ??= []).push(g.id)
  return out
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
