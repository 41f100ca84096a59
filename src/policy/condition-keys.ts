import type { parse } from '@bufbuild/cel'
import { argumentReads, type ArgumentReads, type ConditionReads } from '../mcp/argument-keys.js'

/**
 * Which keys of the arguments a condition reads, from its syntax tree (cel-spec langdef.md
 * §Syntax, §Macros), so the strict scanner can refuse the keys other readers take for them
 * (mcp/argument-keys.ts, docs/security.md §What the gateway reads in a body).
 *
 * A path from `args` through field selections (`args.a.b`), `has()` tests and index operators
 * with a literal (`args['bcc']`, `args.to[0]`) reads those keys by name. Everything else reads
 * more, and is recorded so: a comprehension (`all`, `exists`, `exists_one`, `map`, `filter`)
 * reads every key or element of its range; an index computed at run time reads every key of its
 * operand; any other use of a value (compared, passed to a function, put in a list or map,
 * converted) reads the whole value, every level below included, since what happens to it there
 * is not followed. Over-approximating only refuses more bodies, never lets one through unjudged.
 */

type CelExpr = ReturnType<typeof parse>['expr']

/** Comprehension variables in scope, and the places of the arguments each may stand for. */
type Scope = ReadonlyMap<string, readonly ArgumentReads[]>

/** What the condition `expr` (checked by condition-static.ts) reads of the arguments. */
export function readsOf(expr: CelExpr): ConditionReads {
  const args = argumentReads()
  const names = new Set<string>()
  const walk = new Walk(args, names)
  walk.consume(walk.value(expr, new Map()))
  return { args, names }
}

class Walk {
  constructor(
    private readonly args: ArgumentReads,
    private readonly names: Set<string>,
  ) {}

  /** Every level at `places` is read whole. */
  consume(places: readonly ArgumentReads[]): void {
    for (const p of places) p.whole = true
  }

  /**
   * The places of the arguments `e`'s value may be (empty: none, or a value built from them,
   * whose sources are then read whole), recording what evaluating it reads.
   */
  value(e: CelExpr, scope: Scope): ArgumentReads[] {
    const k = e.exprKind
    switch (k.case) {
      case 'constExpr':
        if (k.value.constantKind.case === 'stringValue') this.names.add(k.value.constantKind.value)
        return []
      case 'identExpr': {
        const bound = scope.get(k.value.name)
        if (bound !== undefined) return [...bound]
        return k.value.name === 'args' ? [this.args] : []
      }
      case 'selectExpr': {
        const s = k.value
        this.names.add(s.field)
        const at = s.operand === undefined ? [] : this.value(s.operand, scope)
        const below = at.map((p) => named(p, s.field))
        // has(args.a.b) reads whether `b` is there: the key is read, its value is not.
        return s.testOnly ? [] : below
      }
      case 'callExpr':
        return this.call(k.value, scope)
      case 'listExpr':
        for (const x of k.value.elements) this.consume(this.value(x, scope))
        return []
      case 'structExpr':
        for (const entry of k.value.entries) {
          if (entry.keyKind.case === 'mapKey') this.consume(this.value(entry.keyKind.value, scope))
          if (entry.value !== undefined) this.consume(this.value(entry.value, scope))
        }
        return []
      case 'comprehensionExpr':
        return this.comprehension(k.value, scope)
      default:
        // condition-static.ts refuses every other form; were one to pass, nothing is known of
        // what it reads, so everything is.
        this.args.whole = true
        return []
    }
  }

  private call(
    c: Extract<CelExpr['exprKind'], { case: 'callExpr' }>['value'],
    scope: Scope,
  ): ArgumentReads[] {
    const [a, b, third] = c.args
    if (c.target === undefined && a !== undefined) {
      if (c.function === '_[_]' && b !== undefined && c.args.length === 2) {
        const at = this.value(a, scope)
        const key = b.exprKind.case === 'constExpr' ? b.exprKind.value.constantKind : undefined
        if (key?.case === 'stringValue') {
          this.names.add(key.value)
          return at.map((p) => named(p, key.value))
        }
        // A number picks an element (or, were it a map, a key no JSON object has).
        if (key !== undefined) return at.map(anyBelow)
        // A key computed at run time may be any key of the level.
        this.consume(this.value(b, scope))
        for (const p of at) p.every = true
        return at.map(anyBelow)
      }
      if (c.function === '_?_:_' && b !== undefined && third !== undefined) {
        this.consume(this.value(a, scope))
        return [...this.value(b, scope), ...this.value(third, scope)]
      }
      if (c.function === '@in' && b !== undefined && c.args.length === 2) {
        const key = a.exprKind.case === 'constExpr' ? a.exprKind.value.constantKind : undefined
        const at = this.value(b, scope)
        if (key?.case === 'stringValue') {
          // `'bcc' in args`: whether the key is there (on a list: a comparison with strings,
          // which reads no key of an element).
          this.names.add(key.value)
          for (const p of at) named(p, key.value)
        } else {
          this.consume(this.value(a, scope))
          this.consume(at)
        }
        return []
      }
      // dyn() is the identity (cel-spec langdef.md §Dynamic Values).
      if (c.function === 'dyn' && c.args.length === 1) return this.value(a, scope)
    }
    if (c.target !== undefined) this.consume(this.value(c.target, scope))
    for (const x of c.args) this.consume(this.value(x, scope))
    return []
  }

  /**
   * A macro's expansion: the range is read key by key or element by element, and its variables
   * stand for the places below it. The accumulator holds only values built by operators, whose
   * sources the loop reads whole, so it stands for no place.
   */
  private comprehension(
    c: Extract<CelExpr['exprKind'], { case: 'comprehensionExpr' }>['value'],
    scope: Scope,
  ): ArgumentReads[] {
    const range = c.iterRange === undefined ? [] : this.value(c.iterRange, scope)
    for (const p of range) p.every = true
    const elements = range.map(anyBelow)
    if (c.accuInit !== undefined) this.consume(this.value(c.accuInit, scope))
    const inner = new Map(scope)
    inner.set(c.iterVar, elements)
    if (c.iterVar2 !== '') inner.set(c.iterVar2, elements)
    inner.set(c.accuVar, [])
    for (const part of [c.loopCondition, c.loopStep])
      if (part !== undefined) this.consume(this.value(part, inner))
    const after = new Map(scope)
    after.set(c.accuVar, [])
    if (c.result !== undefined) this.consume(this.value(c.result, after))
    return []
  }
}

function named(p: ArgumentReads, key: string): ArgumentReads {
  let below = p.named.get(key)
  if (below === undefined) {
    below = argumentReads()
    p.named.set(key, below)
  }
  return below
}

function anyBelow(p: ArgumentReads): ArgumentReads {
  p.any ??= argumentReads()
  return p.any
}
