/**
 * What a change to the policy's index may change in place (docs/policy.md §Hot reload). A build
 * owns everything it fills. A patch (rule-index.ts patchRules) starts from the running index and
 * shares its maps, lists and indexes with it: it copies each the first time it changes it, and
 * changes in place only what it made itself. The running policy goes on deciding meanwhile, and
 * goes on after a reload that fails: nothing it holds may change under it.
 */
export class Writes {
  /** Everything this one made; undefined: a build, which made everything it sees. */
  private readonly made: Set<object> | undefined

  private constructor(patch: boolean) {
    this.made = patch ? new Set() : undefined
  }

  /** A build's: everything is its own. */
  static readonly BUILD = new Writes(false)

  /** A new patch's: nothing is its own yet. */
  static patch(): Writes {
    return new Writes(true)
  }

  /** `x` when this may change it; otherwise `copy(x)`, which it may. */
  own<T extends object>(x: T, copy: (x: T) => T): T {
    // SECURITY: a patch that changed what it did not make would change the running policy.
    if (this.made === undefined || this.made.has(x)) return x
    return this.fresh(copy(x))
  }

  /**
   * Throws unless this may change `x`: an index changed by a patch must be its own copy (own())
   * before it changes a field of its own.
   */
  check(x: object): void {
    // SECURITY: the last guard against a patch writing into the running policy's index.
    if (this.made !== undefined && !this.made.has(x))
      throw new Error('a patch of the policy index changed what it did not copy')
  }

  /** `x`, new, as this one's to change (so a second change does not copy it again). */
  fresh<T extends object>(x: T): T {
    this.made?.add(x)
    return x
  }
}

export const copyMap = <K, V>(m: Map<K, V>): Map<K, V> => new Map(m)
