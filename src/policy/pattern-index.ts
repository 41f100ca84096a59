import { compilePattern, type Matcher } from '../match/pattern.js'

/**
 * Which of many patterns match a name, without trying each (docs/policy.md §What a rule costs):
 * literal names in a Map, `*` alone in one list, and the other patterns grouped by their literal
 * head (or, when they start with `*`, their literal tail) in a sorted prefix table, so a lookup
 * tries only the patterns whose head the name starts with. Each candidate is then confirmed by
 * the one matcher of match/pattern.ts, so the index can only narrow the patterns tried, never
 * change what matches.
 */

/** Where a pattern is filed in an index: by what the name must be, start with or end with. */
const enum Place {
  /** No `*`: the name itself. */
  Exact,
  /** `*`s only: every name. */
  Everything,
  /** A literal head (the text before the first `*`), non-empty. */
  Head,
  /** No head, a literal tail (the text after the last `*`), non-empty. */
  Tail,
  /** Neither head nor tail (`*a*b*`): few in practice, each tried. */
  Loose,
}

/**
 * A pattern worked out once for filing (filePattern): a rule keeps its patterns in this form
 * (compile.ts), so an index built again for a reload that kept the rule (running-rules.ts)
 * slices no heads and compiles no matchers anew. What it allocates per rule is then only the
 * index's own entries, which every young-generation collection during the build copies.
 */
export interface FiledPattern<K extends string = string> {
  /** What the caller files it under (a rule's target kind); '' where there is one kind. */
  readonly kind: K
  readonly place: Place
  /** The name (Exact), the head (Head) or the tail (Tail); '' otherwise. */
  readonly key: string
  /**
   * The whole pattern's matcher, when being filed under the key does not decide it: undefined
   * for an exact name, `*`s alone, and a head or tail with `*`s only (`get_*`, `*_forecast`).
   */
  readonly match: Matcher | undefined
}

/** `pattern`, filed under `kind`, worked out for filing. */
export function filePattern<K extends string>(kind: K, pattern: string): FiledPattern<K> {
  const first = pattern.indexOf('*')
  if (first === -1) return { kind, place: Place.Exact, key: pattern, match: undefined }
  const last = pattern.lastIndexOf('*')
  const head = pattern.slice(0, first)
  const tail = pattern.slice(last + 1)
  const stars = /^\*+$/.test(pattern.slice(first, last + 1))
  if (head === '' && tail === '' && stars)
    return { kind, place: Place.Everything, key: '', match: undefined }
  const match = stars && (head === '' || tail === '') ? undefined : compilePattern(pattern)
  if (head !== '') return { kind, place: Place.Head, key: head, match }
  if (tail !== '') return { kind, place: Place.Tail, key: tail, match }
  return { kind, place: Place.Loose, key: '', match }
}

/**
 * A filed pattern that needs its matcher, with what it was added for. One whose key decides it is
 * filed as the bare number of its rule: no object per pattern.
 */
interface Glob {
  readonly id: number
  readonly match: Matcher
}

type Entry = number | Glob

/** Patterns of one kind of name (tool names, client ids, …), each added with a number (its rule). */
export class PatternIndex {
  private readonly exact = new Map<string, readonly number[]>()
  private readonly everything: number[] = []
  /** Globs by their literal head, non-empty. */
  private readonly heads = new Map<string, readonly Entry[]>()
  /** The distinct lengths of those heads, ascending: one Map lookup per length. */
  private headLengths: number[] = []
  /** Globs that start with `*`, by their literal tail, non-empty. */
  private readonly tails = new Map<string, readonly Entry[]>()
  private tailLengths: number[] = []
  private readonly loose: Entry[] = []
  private size = 0

  /** Adds `pattern` for `id`. Ids must be added in ascending order (rule order). */
  add(pattern: FiledPattern, id: number): void {
    this.size++
    const { place, key, match } = pattern
    const entry: Entry = match === undefined ? id : { id, match }
    switch (place) {
      case Place.Exact:
        appendOnce(this.exact, key, id)
        return
      case Place.Everything:
        if (this.everything[this.everything.length - 1] !== id) this.everything.push(id)
        return
      case Place.Head:
        append(this.heads, key, entry)
        this.headLengths = withLength(this.headLengths, key.length)
        return
      case Place.Tail:
        append(this.tails, key, entry)
        this.tailLengths = withLength(this.tailLengths, key.length)
        return
      case Place.Loose:
        this.loose.push(entry)
    }
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
  entries: readonly Entry[],
  value: string,
  out: number[] | undefined,
): number[] | undefined {
  for (const e of entries)
    if (typeof e === 'number') (out ??= []).push(e)
    else if (e.match(value)) (out ??= []).push(e.id)
  return out
}

/**
 * The list of one id, shared by every index and every policy: most names and heads are one
 * rule's, and an array per key, all of it new on every build, was most of what a reload's index
 * left for young-generation collections to copy. Frozen, so no index can change another's; a
 * list that gets a second id is a new array (append). Kept for the life of the process: one
 * array per rule number ever filed, as many as the largest policy loaded has rules.
 */
const ONE: (readonly number[])[] = []

/** `[id]`, shared (ONE). */
export function one(id: number): readonly number[] {
  let list = ONE[id]
  if (list === undefined) {
    // Filled in order, so the array stays packed: ids are rule numbers, from 0 up.
    for (let k = ONE.length; k < id; k++) ONE.push(Object.freeze([k]))
    ONE.push((list = Object.freeze([id])))
  }
  return list
}

/** Appends `entry` to `key`'s list; a list of one is shared (`one`) and is never changed. */
function append<K, E extends Entry>(map: Map<K, readonly E[]>, key: K, entry: E): void {
  const list = map.get(key)
  if (list === undefined)
    map.set(key, typeof entry === 'number' ? (one(entry) as readonly E[]) : [entry])
  // SECURITY: a list of one may be every index's (`one`): grown in place, it would file this
  // name under that rule number in every policy.
  else if (list.length === 1) map.set(key, [list[0] as E, entry])
  else (list as E[]).push(entry)
}

/** append() of an id, once: ids arrive in ascending order, so a repeat is the last one. */
export function appendOnce<K>(map: Map<K, readonly number[]>, key: K, id: number): void {
  const list = map.get(key)
  if (list === undefined || list[list.length - 1] !== id) append(map, key, id)
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
