import { createHash } from 'node:crypto'
import type { CompiledLimit } from '../limits/rules.js'
import type { PolicyCaller } from '../match/claims.js'
import { clientIdOf } from '../match/clients.js'
import type { CompiledRule, TargetKind } from './compile.js'
import { appendOnce, ascendingOnce, PatternIndex } from './pattern-index.js'
import { whole } from './slices.js'

/**
 * Rules filed so that a decision looks only at the rules that could apply to it
 * (docs/policy.md §What a rule costs). A rule is known by its number, its place in file and rule
 * order, which is the order decisions report rules in. The index only narrows: every rule it
 * returns is then judged by its own matchers, exactly as a scan over every rule would.
 */

type Side = 'allow' | 'deny'

/** Rules indexed together: by the names their targets match, and by who they are for. */
export class RuleGroup {
  /** The numbers of the rules in the group, ascending. */
  readonly ids: number[] = []
  private readonly targets: Readonly<Record<Side, Map<TargetKind, PatternIndex>>> = {
    deny: new Map(),
    allow: new Map(),
  }
  private readonly callers = new CallerIndex()

  add(rule: CompiledRule, id: number): void {
    this.ids.push(id)
    for (const side of SIDES) {
      const targets = this.targets[side]
      for (const p of side === 'allow' ? rule.filedAllow : rule.filedDeny) {
        let index = targets.get(p.kind)
        if (index === undefined) targets.set(p.kind, (index = new PatternIndex()))
        index.add(p, id)
      }
    }
    if (rule.whenSpec !== undefined) this.callers.add(rule, id)
  }

  /** The rules whose `side` patterns of `kind` match `value`: ascending, each once. */
  matching(side: Side, kind: TargetKind, value: string): readonly number[] {
    return this.targets[side].get(kind)?.lookup(value) ?? NONE
  }

  /** The index of the group's `side` patterns of `kind`; undefined when no rule has any. */
  index(side: Side, kind: TargetKind): PatternIndex | undefined {
    return this.targets[side].get(kind)
  }

  /** Rules with `when` that may be for `caller`: a superset of those that are, ascending. */
  maybeFor(caller: PolicyCaller | undefined): readonly number[] {
    return caller === undefined ? NONE : this.callers.candidates(caller)
  }
}

const SIDES: readonly Side[] = ['deny', 'allow']
const NONE: readonly number[] = Object.freeze([])

/**
 * Rules with `when`, by the first claim they name (its name, then its value) or, without claims,
 * by their client patterns. A caller's candidates are the rules filed under its own claim values
 * and its client id; `when` itself then decides (match/when.ts). A rule is filed under one claim
 * only: it needs every claim it names, so the first one finding it is enough.
 */
class CallerIndex {
  private readonly byClaim = new Map<string, Map<unknown, readonly number[]>>()
  private readonly clients = new PatternIndex()

  add(rule: CompiledRule, id: number): void {
    const when = rule.whenSpec
    const first = when?.claims === undefined ? undefined : Object.entries(when.claims)[0]
    if (first !== undefined) {
      const [name, value] = first
      let values = this.byClaim.get(name)
      if (values === undefined) this.byClaim.set(name, (values = new Map()))
      // Shared while it holds one rule (pattern-index.ts `one`): most claim values are one rule's.
      appendOnce(values, value, id)
      return
    }
    for (const p of rule.filedClients) this.clients.add(p, id)
  }

  candidates(caller: PolicyCaller): readonly number[] {
    const found: number[] = []
    const claims = caller.claims
    for (const [name, values] of this.byClaim) {
      // SECURITY: own claims only, as match/claims.ts reads them (never `constructor`).
      if (!Object.hasOwn(claims, name)) continue
      const actual = claims[name]
      // Map keys compare as `Array.prototype.includes` does, and `when` confirms each candidate.
      if (Array.isArray(actual)) for (const v of actual as unknown[]) push(found, values.get(v))
      else push(found, values.get(actual))
    }
    if (!this.clients.empty) {
      const client = clientIdOf(caller)
      if (client !== undefined) found.push(...this.clients.lookup(client))
    }
    return found.length === 0 ? NONE : ascendingOnce(found)
  }
}

function push(out: number[], ids: readonly number[] | undefined): void {
  if (ids !== undefined) for (const id of ids) out.push(id)
}

/** Two ascending lists of distinct numbers as one. */
export function mergeAscending(a: readonly number[], b: readonly number[]): readonly number[] {
  if (b.length === 0) return a
  if (a.length === 0) return b
  const out: number[] = []
  let i = 0
  let j = 0
  while (i < a.length && j < b.length) {
    const x = a[i] as number
    const y = b[j] as number
    if (x < y) {
      out.push(x)
      i++
    } else {
      out.push(y)
      j++
    }
  }
  while (i < a.length) out.push(a[i++] as number)
  while (j < b.length) out.push(b[j++] as number)
  return out
}

/** What one server's lists and calls need to know of the policy, worked out once per server. */
export interface ServerFacts {
  /** Some enforced rule for this server has `when`: what a caller sees depends on who they are. */
  readonly identityDependent: boolean
  /** Some rule for this server has `if` or `unless`: its calls' bodies must be read. */
  readonly conditional: boolean
  /** The list key of the enforced rules for this server that apply to every caller. */
  readonly everyoneKey: string
  /** A digest of the conditions of this server's rules (what its body reading is compiled for). */
  readonly conditions: string
}

/** A policy's rules indexed, and what each configured server needs of them. */
export interface RuleIndex {
  /** Rules naming only literal servers, under each server they name. */
  readonly own: ReadonlyMap<string, RuleGroup>
  /** Rules naming some server pattern: looked up for every server, then matched against it. */
  readonly shared: RuleGroup
  readonly facts: ReadonlyMap<string, ServerFacts>
  /** PolicySet.runtimeShape. */
  readonly runtimeShape: string
}

/** Rules indexed between two looks at the clock of a paced build (slices.ts Pacer). */
const RULES_PER_STEP = 16
/** Rules looked at for a server's facts between two looks at the clock: each costs far less. */
const FACTS_PER_STEP = 256

/**
 * Builds the index of `rules` for the configured `servers`, pausing (`yield`) between steps of
 * a few milliseconds each, so a reload can build it beside a running policy (load.ts). whole()
 * runs it at once.
 */
export function* indexRules(
  rules: readonly CompiledRule[],
  servers: Iterable<string>,
  limits: readonly CompiledLimit[],
): Generator<void, RuleIndex, void> {
  const own = new Map<string, RuleGroup>()
  const shared = new RuleGroup()
  for (let id = 0; id < rules.length; id++) {
    const rule = rules[id] as CompiledRule
    if (rule.serverPatterns.some((p) => p.includes('*'))) shared.add(rule, id)
    else
      for (const server of new Set(rule.serverPatterns)) {
        let group = own.get(server)
        if (group === undefined) own.set(server, (group = new RuleGroup()))
        group.add(rule, id)
      }
    if (id % RULES_PER_STEP === RULES_PER_STEP - 1) yield
  }
  const facts = new Map<string, ServerFacts>()
  for (const s of servers) {
    facts.set(s, yield* factsIn(rulesOf(rules, own, shared, s), s))
    yield
  }
  const runtimeShape = digest([
    ...limits.map((l) => l.id),
    ...[...facts].map(([s, f]) => `${s}:${f.conditions}`),
  ])
  return { own, shared, facts, runtimeShape }
}

/** Every rule whose `servers` match `server`, in rule order. */
export function rulesOf(
  rules: readonly CompiledRule[],
  own: ReadonlyMap<string, RuleGroup>,
  shared: RuleGroup,
  server: string,
): CompiledRule[] {
  const mine = own.get(server)?.ids ?? NONE
  const theirs = shared.ids.filter((id) => (rules[id] as CompiledRule).servers(server))
  return mergeAscending(mine, theirs).map((id) => rules[id] as CompiledRule)
}

/** The facts of one server, from its rules in rule order. */
export function factsOf(rules: readonly CompiledRule[], server: string): ServerFacts {
  return whole(factsIn(rules, server))
}

/**
 * factsOf in steps (indexRules): a server every rule of a large policy applies to is 10,000
 * rules, 2–4 ms in one step.
 */
function* factsIn(
  rules: readonly CompiledRule[],
  server: string,
): Generator<void, ServerFacts, void> {
  let identityDependent = false
  const conditions: string[] = []
  const everyone: string[] = []
  for (let i = 0; i < rules.length; i++) {
    const r = rules[i] as CompiledRule
    if (i % FACTS_PER_STEP === FACTS_PER_STEP - 1) yield
    if (r.condition !== undefined) conditions.push(`${r.condition.kind}:${r.condition.source}`)
    if (r.dryRun) continue
    if (r.when === undefined) everyone.push(r.id)
    else identityDependent = true
  }
  return {
    identityDependent,
    conditional: conditions.length > 0,
    everyoneKey: `${server}:${digest(everyone)}`,
    conditions: digest(conditions),
  }
}

/** A short, collision-resistant name of a list of rule ids, for list filter keys. */
export function digest(ids: readonly string[]): string {
  return createHash('sha256').update(ids.join('\n')).digest('hex').slice(0, 32)
}
