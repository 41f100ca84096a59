import { readerKey } from './key-fold.js'
import { ARGUMENT_FIELDS } from './methods.js'

/**
 * The keys of a call's arguments that policy conditions read (docs/policy.md §Conditions), in the
 * form the strict scanner walks (strict-json.ts `ScanOptions.reads`). A condition reads its keys
 * byte for byte; a backend may read other keys as those: Go's encoding/json takes `Bcc` for a
 * struct field `bcc` when no field is spelled `Bcc`, a C reader takes `bcc\u0000x` for `bcc`, an
 * object built by assignment reads `__proto__`'s members as its own. Such a key, alone or next to
 * the exact one, would give the backend a value the condition never saw (or saw absent), so at
 * every level a condition reads the scanner refuses it (docs/security.md §What the gateway reads
 * in a body). Levels no condition reads are the tool's business and pass as they are.
 */

/**
 * What conditions read at one level of the arguments (the object or array at one path), as the
 * policy builds it from a condition's syntax tree (policy/condition-keys.ts).
 */
export interface ArgumentReads {
  /** Keys read by name (`args.bcc`, `has(args.bcc)`, `args['bcc']`) and what is read below them. */
  readonly named: Map<string, ArgumentReads>
  /** What is read below every key and element (`args[k]`, a comprehension's variable, `[0]`). */
  any: ArgumentReads | undefined
  /** Every key of this level is read: a comprehension ranges over it, or a key is computed. */
  every: boolean
  /** The whole value is read, every level below included: compared, converted, passed on. */
  whole: boolean
}

export function argumentReads(): ArgumentReads {
  return { named: new Map(), any: undefined, every: false, whole: false }
}

/** What one condition reads of the arguments, and the strings it can tell keys apart by. */
export interface ConditionReads {
  readonly args: ArgumentReads
  /** Every field name and string literal of the condition. */
  readonly names: ReadonlySet<string>
}

/**
 * One level of the arguments as the scanner judges it. Keys are looked up by length first (most
 * keys of a body have a length no key read has), then compared: levels hold a few keys, and a
 * comparison of short strings costs less than hashing a key the body just spelled.
 */
export interface KeyLevel {
  /** The keys read here byte for byte, by UTF-16 length, each with the level below it. */
  readonly exact: readonly (readonly ExactKey[] | undefined)[]
  /**
   * The keys accepted as spelled (the exact ones and, on a level read whole, every name), by the
   * length of their reader key (key-fold.ts): a key with the same reader key is refused.
   */
  readonly spelled: readonly (readonly SpelledKey[] | undefined)[]
  /** Every key is read here, so a key cut at NUL is refused whatever it reads as. */
  readonly every: boolean
  /** The level below any other key, and below the elements of an array; undefined: not read. */
  readonly other: KeyLevel | undefined
}

interface ExactKey {
  readonly key: string
  readonly below: KeyLevel
}

interface SpelledKey {
  readonly key: string
  readonly reads: string
}

/** The compiled reads of one server's conditions (or a virtual server's members'). */
export interface ArgumentKeys {
  /**
   * The level of `params`, where the arguments are read: `arguments`, and completion's
   * `argument` (methods.ts ARGUMENT_FIELDS), both at the level of what the conditions read.
   */
  readonly params: KeyLevel
  readonly sources: readonly ConditionReads[]
}

/**
 * Past this many levels the compiled form gives up on precision and judges every key at every
 * depth: merging paths with `any` steps is exponential in the worst case, and a policy is text
 * an operator wrote, not a reason to spend memory.
 */
const MAX_LEVELS = 10_000

class TooManyLevels extends Error {}

/** Compiles what the conditions read into the levels the scanner walks; undefined for none. */
export function compileArgumentKeys(sources: readonly ConditionReads[]): ArgumentKeys | undefined {
  if (sources.length === 0) return undefined
  const names = new Set<string>()
  for (const s of sources) for (const n of s.names) names.add(n)
  const roots = sources.map((s) => s.args)
  let root: KeyLevel
  try {
    root = new Levels(names).level(roots, false)
  } catch (err) {
    if (!(err instanceof TooManyLevels)) throw err
    // SECURITY: the fallback reads more, never less: every key at every depth, judged whole.
    root = new Levels(names).level([], true)
  }
  const fields = [...new Set(ARGUMENT_FIELDS.values())]
  const params: KeyLevel = {
    exact: byLength(fields.map((key) => ({ key, below: root }))),
    spelled: spelledOf(fields),
    every: false,
    other: undefined,
  }
  return { params, sources }
}

/** The union of several compiled reads (a virtual server's front judges for all its members). */
export function unionArgumentKeys(
  all: readonly (ArgumentKeys | undefined)[],
): ArgumentKeys | undefined {
  return compileArgumentKeys(all.flatMap((k) => k?.sources ?? []))
}

interface MutableLevel {
  exact: (readonly ExactKey[] | undefined)[]
  spelled: (readonly SpelledKey[] | undefined)[]
  every: boolean
  other: KeyLevel | undefined
}

/** `entries` by the length of `length(entry)`, dense so a lookup is a plain load. */
function byLength<T extends { readonly key: string }>(
  entries: readonly T[],
  length: (entry: T) => number = (e) => e.key.length,
): (readonly T[] | undefined)[] {
  const out: (T[] | undefined)[] = []
  for (const e of entries) (out[length(e)] ??= []).push(e)
  for (let n = 0; n < out.length; n++) out[n] ??= undefined
  return out
}

function spelledOf(keys: Iterable<string>): (readonly SpelledKey[] | undefined)[] {
  const entries = [...new Set(keys)].map((key) => ({ key, reads: readerKey(key) }))
  return byLength(entries, (e) => e.reads.length)
}

/** Merges the read trees of several conditions, level by level, each distinct group once. */
class Levels {
  private readonly ids = new Map<ArgumentReads, number>()
  private readonly built = new Map<string, KeyLevel>()

  constructor(private readonly names: ReadonlySet<string>) {}

  /** The level where all of `group` is read; `whole`: some level above is read whole. */
  level(group: readonly ArgumentReads[], whole: boolean): KeyLevel {
    const below = whole || group.some((r) => r.whole)
    const memo = `${below ? 'w' : ''}${[...new Set(group.map((r) => this.id(r)))].sort((a, b) => a - b).join(',')}`
    const known = this.built.get(memo)
    if (known !== undefined) return known
    if (this.built.size >= MAX_LEVELS) throw new TooManyLevels()
    const every = below || group.some((r) => r.every)
    const out: MutableLevel = { exact: [], spelled: [], every, other: undefined }
    // Registered before its children, so a level read whole is its own `other` (a cycle).
    this.built.set(memo, out)
    const anys = group.flatMap((r) => (r.any === undefined ? [] : [r.any]))
    if (anys.length > 0 || below) out.other = this.level(anys, below)
    const keys = new Set(group.flatMap((r) => [...r.named.keys()]))
    const exact: ExactKey[] = []
    for (const key of keys) {
      const at = group.flatMap((r) => {
        const n = r.named.get(key)
        return n === undefined ? [] : [n]
      })
      exact.push({ key, below: this.level([...at, ...anys], below) })
    }
    out.exact = byLength(exact)
    out.spelled = spelledOf(every ? [...keys, ...this.names] : keys)
    return out
  }

  private id(r: ArgumentReads): number {
    let id = this.ids.get(r)
    if (id === undefined) {
      id = this.ids.size
      this.ids.set(r, id)
    }
    return id
  }
}
