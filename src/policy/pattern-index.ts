import { compilePattern, type Matcher } from '../match/pattern.js'
import { copyMap, Writes } from './copy-on-write.js'
import { ShardedMap } from './sharded-map.js'

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

const idOf = (e: Entry): number => (typeof e === 'number' ? e : e.id)

/**
 * Patterns of one kind of name (tool names, client ids, …), each added with a number (its rule).
 * Built by add() in rule order; a reload's patch (rule-index.ts) then removes and adds the
 * patterns of the rules it changed, anywhere, under copy-on-write.ts.
 */
export class PatternIndex {
  // The maps of names, heads and tails grow with the policy: sharded, so a patch copies a shard.
  private exact = new ShardedMap<string, readonly number[]>()
  private everything: readonly number[] = []
  /** Globs by their literal head, non-empty. */
  private heads = new ShardedMap<string, readonly Entry[]>()
  /** The distinct lengths of those heads, ascending: one Map lookup per length. */
  private headLengths: readonly number[] = []
  /** How many heads have each length: a patch that removes the last drops the length. */
  private headCounts = new Map<number, number>()
  /** Globs that start with `*`, by their literal tail, non-empty. */
  private tails = new ShardedMap<string, readonly Entry[]>()
  private tailLengths: readonly number[] = []
  private tailCounts = new Map<number, number>()
  private loose: readonly Entry[] = []
  private size = 0

  /** A copy sharing every map and list with this one: a patch's (`w.own(index, copy)`). */
  copy(): PatternIndex {
    return Object.assign(new PatternIndex(), this)
  }

  /** Adds `pattern` for `id`: where `w` may change, after the entries of earlier ids. */
  add(pattern: FiledPattern, id: number, w: Writes = Writes.BUILD): void {
    w.check(this)
    this.size++
    const { place, key, match } = pattern
    const entry: Entry = match === undefined ? id : { id, match }
    switch (place) {
      case Place.Exact:
        this.exact = fileUnder(this.exact, key, id, true, w)
        return
      case Place.Everything:
        this.everything = filed(this.everything, id, true, w)
        return
      case Place.Head:
        if (!this.heads.has(key)) this.counted(Place.Head, key.length, 1, w)
        this.heads = fileUnder(this.heads, key, entry, false, w)
        return
      case Place.Tail:
        if (!this.tails.has(key)) this.counted(Place.Tail, key.length, 1, w)
        this.tails = fileUnder(this.tails, key, entry, false, w)
        return
      case Place.Loose:
        this.loose = filed(this.loose, entry, false, w)
    }
  }

  /**
   * Removes `pattern`, added for `id`: every entry of `id` where it was filed (a rule is removed
   * with all its patterns, so one under the same key goes too). Leaves the index as a build
   * without that pattern would have made it.
   */
  remove(pattern: FiledPattern, id: number, w: Writes): void {
    w.check(this)
    this.size--
    const { place, key } = pattern
    switch (place) {
      case Place.Exact:
        this.exact = unfileUnder(this.exact, key, id, w)
        return
      case Place.Everything:
        this.everything = unfiled(this.everything, id, w) ?? []
        return
      case Place.Head: {
        // A rule's second pattern under one key finds it gone already: counted out once.
        const had = this.heads.has(key)
        this.heads = unfileUnder(this.heads, key, id, w)
        if (had && !this.heads.has(key)) this.counted(Place.Head, key.length, -1, w)
        return
      }
      case Place.Tail: {
        const had = this.tails.has(key)
        this.tails = unfileUnder(this.tails, key, id, w)
        if (had && !this.tails.has(key)) this.counted(Place.Tail, key.length, -1, w)
        return
      }
      case Place.Loose:
        this.loose = unfiled(this.loose, id, w) ?? []
    }
  }

  /** Counts a head or tail of `length` in (`by` 1) or out (-1), and keeps the lengths in step. */
  private counted(place: Place.Head | Place.Tail, length: number, by: 1 | -1, w: Writes): void {
    const head = place === Place.Head
    const counts = w.own(head ? this.headCounts : this.tailCounts, copyMap)
    const count = (counts.get(length) ?? 0) + by
    if (count === 0) counts.delete(length)
    else counts.set(length, count)
    const lengths = head ? this.headLengths : this.tailLengths
    const now =
      count === 0
        ? lengths.filter((l) => l !== length)
        : count === 1 && by === 1
          ? [...lengths, length].sort((a, b) => a - b)
          : lengths
    if (head) {
      this.headCounts = counts
      this.headLengths = now
    } else {
      this.tailCounts = counts
      this.tailLengths = now
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

/**
 * `list` with `entry` filed in id order: after the entries of its own and earlier ids (a build
 * adds in id order, so at the end). `once`: not again where its id has an entry already (a name
 * or a claim value is filed once per rule). Changed in place only where `w` may.
 */
export function filed<E extends Entry>(
  list: readonly E[] | undefined,
  entry: E,
  once: boolean,
  w: Writes,
): readonly E[] {
  if (list === undefined)
    return typeof entry === 'number' ? (one(entry) as readonly E[]) : w.fresh([entry])
  const id = idOf(entry)
  const last = list[list.length - 1]
  // A build adds in id order: at the end, with no search.
  const at = last === undefined || idOf(last) < id ? list.length : above(list, id)
  if (once && at > 0 && idOf(list[at - 1] as E) === id) return list
  // SECURITY: a list of one may be every index's (`one`): grown in place, it would file this
  // name under that rule number in every policy.
  const out = list.length === 1 ? w.fresh([...list]) : w.own(list as E[], copyList)
  if (at === out.length) out.push(entry)
  else out.splice(at, 0, entry)
  return out
}

/** `list` without the entries of `id` (itself when it has none); undefined when none is left. */
export function unfiled<E extends Entry>(
  list: readonly E[],
  id: number,
  w: Writes,
): readonly E[] | undefined {
  const end = above(list, id)
  let start = end
  while (start > 0 && idOf(list[start - 1] as E) === id) start--
  if (start === end) return list
  if (end - start === list.length) return undefined
  const kept = list.slice(0, start).concat(list.slice(end))
  const [only] = kept
  return kept.length === 1 && typeof only === 'number' ? (one(only) as readonly E[]) : w.fresh(kept)
}

/** The first place in `list` (ascending by id) whose entry's id is above `id`. */
function above(list: readonly Entry[], id: number): number {
  let low = 0
  let high = list.length
  while (low < high) {
    const mid = (low + high) >>> 1
    if (idOf(list[mid] as Entry) <= id) low = mid + 1
    else high = mid
  }
  return low
}

/** `map` with `entry` filed under `key` (filed()): `map` itself, or its copy where `w` must. */
export function fileUnder<K, E extends Entry>(
  map: ShardedMap<K, readonly E[]>,
  key: K,
  entry: E,
  once: boolean,
  w: Writes,
): ShardedMap<K, readonly E[]> {
  return changedUnder(map, key, (list) => filed(list, entry, once, w), w)
}

/** `map` without the entries of `id` under `key` (unfiled()), the key gone with the last. */
export function unfileUnder<K, E extends Entry>(
  map: ShardedMap<K, readonly E[]>,
  key: K,
  id: number,
  w: Writes,
): ShardedMap<K, readonly E[]> {
  return changedUnder(map, key, (list) => (list === undefined ? list : unfiled(list, id, w)), w)
}

/**
 * `map` with `key`'s list as `change` makes it (undefined: the key goes): `map` itself when the
 * list is the same, or changed where `w` may (the map's own copy sharing all but the shard of
 * `key`, sharded-map.ts).
 */
function changedUnder<K, E>(
  map: ShardedMap<K, readonly E[]>,
  key: K,
  change: (list: readonly E[] | undefined) => readonly E[] | undefined,
  w: Writes,
): ShardedMap<K, readonly E[]> {
  const list = map.get(key)
  const out = change(list)
  if (out === list) return map
  const changed = w.own(map, copySharded)
  if (out === undefined) changed.delete(key, w)
  else changed.set(key, out, w)
  return changed
}

const copySharded = <K, V>(map: ShardedMap<K, V>): ShardedMap<K, V> => map.copy()

const copyList = <E>(list: E[]): E[] => [...list]

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
