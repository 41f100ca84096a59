import { createHash } from 'node:crypto'
import type { CompiledLimit } from '../limits/rules.js'
import type { PolicyCaller } from '../match/claims.js'
import { clientIdOf } from '../match/clients.js'
import type { CompiledRule, TargetKind } from './compile.js'
import { copyMap, Writes } from './copy-on-write.js'
import {
  ascendingOnce,
  filed,
  fileUnder,
  PatternIndex,
  unfiled,
  unfileUnder,
} from './pattern-index.js'
import { ShardedMap } from './sharded-map.js'
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
  private idList: readonly number[] = []
  private targets: Readonly<Record<Side, Map<TargetKind, PatternIndex>>> = {
    deny: new Map(),
    allow: new Map(),
  }
  private callers = new CallerIndex()

  /** The numbers of the rules in the group, ascending. */
  get ids(): readonly number[] {
    return this.idList
  }

  /** A copy sharing everything with this one: a patch's (`w.own(group, copy)`). */
  copy(): RuleGroup {
    return Object.assign(new RuleGroup(), this)
  }

  /** Files `rule` as number `id`: where `w` may change (copy-on-write.ts). */
  add(rule: CompiledRule, id: number, w: Writes = Writes.BUILD): void {
    w.check(this)
    this.idList = filed(this.idList, id, true, w)
    for (const side of SIDES)
      for (const p of filedOn(rule, side)) this.writable(side, p.kind, w).add(p, id, w)
    if (rule.whenSpec !== undefined) this.writableCallers(w).add(rule, id, w)
  }

  /** Unfiles `rule`, filed as `id`: the group is then as a build without it would make it. */
  remove(rule: CompiledRule, id: number, w: Writes): void {
    w.check(this)
    this.idList = unfiled(this.idList, id, w) ?? NONE
    for (const side of SIDES)
      for (const p of filedOn(rule, side)) {
        const index = this.writable(side, p.kind, w)
        index.remove(p, id, w)
        if (index.empty) this.setIndex(side, p.kind, undefined, w)
      }
    if (rule.whenSpec !== undefined) this.writableCallers(w).remove(rule, id, w)
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

  /** The index of `side` patterns of `kind`, `w`'s to change: made when there is none. */
  private writable(side: Side, kind: TargetKind, w: Writes): PatternIndex {
    const index = this.targets[side].get(kind)
    const mine = index === undefined ? w.fresh(new PatternIndex()) : w.own(index, copyIndex)
    if (mine !== index) this.setIndex(side, kind, mine, w)
    return mine
  }

  private setIndex(side: Side, kind: TargetKind, index: PatternIndex | undefined, w: Writes): void {
    const before = this.targets[side]
    const map = w.own(before, copyMap)
    if (index === undefined) map.delete(kind)
    else map.set(kind, index)
    // `targets` may be the running group's too: replaced, never changed.
    if (map !== before) this.targets = { ...this.targets, [side]: map }
  }

  private writableCallers(w: Writes): CallerIndex {
    return (this.callers = w.own(this.callers, (c) => c.copy()))
  }
}

const SIDES: readonly Side[] = ['deny', 'allow']
const NONE: readonly number[] = Object.freeze([])

const filedOn = (rule: CompiledRule, side: Side) =>
  side === 'allow' ? rule.filedAllow : rule.filedDeny
const copyIndex = (index: PatternIndex): PatternIndex => index.copy()

/**
 * Rules with `when`, by the first claim they name (its name, then its value) or, without claims,
 * by their client patterns. A caller's candidates are the rules filed under its own claim values
 * and its client id; `when` itself then decides (match/when.ts). A rule is filed under one claim
 * only: it needs every claim it names, so the first one finding it is enough.
 */
class CallerIndex {
  private byClaim = new Map<string, ShardedMap<unknown, readonly number[]>>()
  private clients = new PatternIndex()

  copy(): CallerIndex {
    return Object.assign(new CallerIndex(), this)
  }

  add(rule: CompiledRule, id: number, w: Writes): void {
    w.check(this)
    const first = firstClaim(rule)
    if (first !== undefined) {
      const [name, value] = first
      const values = this.byClaim.get(name)
      // Shared while it holds one rule (pattern-index.ts `one`): most claim values are one rule's.
      const changed = fileUnder(
        values ?? w.fresh(new ShardedMap<unknown, readonly number[]>()),
        value,
        id,
        true,
        w,
      )
      if (changed !== values) this.setClaim(name, changed, w)
      return
    }
    if (rule.filedClients.length === 0) return
    this.clients = w.own(this.clients, copyIndex)
    for (const p of rule.filedClients) this.clients.add(p, id, w)
  }

  remove(rule: CompiledRule, id: number, w: Writes): void {
    w.check(this)
    const first = firstClaim(rule)
    if (first !== undefined) {
      const [name, value] = first
      const values = this.byClaim.get(name)
      const changed = values === undefined ? values : unfileUnder(values, value, id, w)
      // A map this patch made is changed in place: emptied, it must still go.
      if (changed !== values || changed?.size === 0) this.setClaim(name, changed, w)
      return
    }
    if (rule.filedClients.length === 0) return
    this.clients = w.own(this.clients, copyIndex)
    for (const p of rule.filedClients) this.clients.remove(p, id, w)
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

  /** `name`'s values as `values`; gone when it has none. */
  private setClaim(
    name: string,
    values: ShardedMap<unknown, readonly number[]> | undefined,
    w: Writes,
  ) {
    this.byClaim = w.own(this.byClaim, copyMap)
    if (values === undefined || values.size === 0) this.byClaim.delete(name)
    else this.byClaim.set(name, values)
  }
}

/** The claim a rule with `when` is filed under: the first it names. */
function firstClaim(rule: CompiledRule): [string, unknown] | undefined {
  const claims = rule.whenSpec?.claims
  return claims === undefined ? undefined : Object.entries(claims)[0]
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

/** The policy a reload replaces: its rules and their index. */
export interface Indexed {
  readonly rules: readonly CompiledRule[]
  readonly index: RuleIndex
}

/** Rules filed between two looks at the clock of a paced build (slices.ts Pacer). */
const RULES_PER_STEP = 16
/** Rules looked at for a server's facts between two looks at the clock: each costs far less. */
const FACTS_PER_STEP = 256
/**
 * A reload patches the running index when it changed at most this many rules, or a 64th of
 * them: a patch costs about what a build of that many rules does, plus a copy of the shard of
 * each map it changes (sharded-map.ts: a few hundred entries at most) and of each list of rule
 * numbers, where a build of 10,000 rules is 8–45 ms.
 */
const PATCH_AT_LEAST = 16

/**
 * The index of `rules` for the configured `servers`, in steps of a few milliseconds (`yield`), so
 * a reload can make it beside a running policy (load.ts); whole() runs it at once. Beside
 * `running`, when the reload changed few of its rules, it is a patch of the running index: the
 * changed rules unfiled and filed again, every list and map shard they touch copied first
 * (copy-on-write.ts, sharded-map.ts), all else shared; a server's facts are worked out again only where a changed
 * rule names it. The index is the same as a build's either way (policy-index tests).
 */
export function* indexRules(
  rules: readonly CompiledRule[],
  servers: Iterable<string>,
  limits: readonly CompiledLimit[],
  running?: Indexed,
): Generator<void, RuleIndex, void> {
  const changed = running === undefined ? undefined : changesFrom(running.rules, rules)
  const from = changed === undefined ? undefined : running
  const w = from === undefined ? Writes.BUILD : Writes.patch()
  const own = new Map(from?.index.own)
  let shared = from?.index.shared ?? new RuleGroup()
  // SECURITY: a group is changed only as `w`'s own copy; the running one serves meanwhile.
  const groupFor = (server: string): RuleGroup => {
    const group = own.get(server)
    const mine = group === undefined ? w.fresh(new RuleGroup()) : w.own(group, copyGroup)
    if (mine !== group) own.set(server, mine)
    return mine
  }
  /** The groups `rule` is filed in, each `w`'s own to change. */
  const groupsOf = (rule: CompiledRule): RuleGroup[] => {
    const named = serversNamed(rule)
    if (named === undefined) return [(shared = w.own(shared, copyGroup))]
    return [...named].map(groupFor)
  }
  const ids = changed ?? rules.keys()
  let step = 0
  for (const id of ids) {
    const before = from?.rules[id]
    const after = rules[id]
    if (before !== undefined) for (const group of groupsOf(before)) group.remove(before, id, w)
    if (after !== undefined) for (const group of groupsOf(after)) group.add(after, id, w)
    if (++step % RULES_PER_STEP === 0) yield
  }
  // A build makes no group without a rule, so neither does a patch.
  if (from !== undefined) for (const [s, group] of own) if (group.ids.length === 0) own.delete(s)
  const stale = from === undefined ? undefined : serversOf(from.rules, rules, changed ?? [])
  const facts = new Map<string, ServerFacts>()
  for (const s of servers) {
    const kept = stale === undefined || stale === EVERY || stale.has(s) ? undefined : from?.index
    facts.set(s, kept?.facts.get(s) ?? (yield* factsIn(rules, idsOf(rules, own, shared, s), s)))
    yield
  }
  const runtimeShape = digest([
    ...limits.map((l) => l.id),
    ...[...facts].map(([s, f]) => `${s}:${f.conditions}`),
  ])
  return { own, shared, facts, runtimeShape }
}

const copyGroup = (group: RuleGroup): RuleGroup => group.copy()

/** The literal servers a rule is filed under; undefined: it names a pattern (the shared group). */
function serversNamed(rule: CompiledRule): ReadonlySet<string> | undefined {
  return rule.serverPatterns.some((p) => p.includes('*')) ? undefined : new Set(rule.serverPatterns)
}

/**
 * The numbers of the rules `after` holds in place of `before`'s (each rule is known by its place;
 * a reload's reader hands back the running rule object where the edit left it as it was), when
 * few enough for a patch (PATCH_AT_LEAST); undefined: build. A rule added or removed before
 * others moves them all, so a build.
 */
function changesFrom(
  before: readonly CompiledRule[],
  after: readonly CompiledRule[],
): number[] | undefined {
  const most = Math.max(PATCH_AT_LEAST, after.length >> 6)
  const changed: number[] = []
  const length = Math.max(before.length, after.length)
  for (let id = 0; id < length; id++)
    if (before[id] !== after[id] && changed.push(id) > most) return undefined
  return changed
}

const EVERY = 'every'

/** The servers whose facts `changed` rules may change: every one when one names a pattern. */
function serversOf(
  before: readonly CompiledRule[],
  after: readonly CompiledRule[],
  changed: readonly number[],
): ReadonlySet<string> | typeof EVERY {
  const servers = new Set<string>()
  for (const id of changed)
    for (const rule of [before[id], after[id]]) {
      if (rule === undefined) continue
      const named = serversNamed(rule)
      if (named === undefined) return EVERY
      for (const s of named) servers.add(s)
    }
  return servers
}

/** Every rule whose `servers` match `server`, in rule order. */
export function rulesOf(
  rules: readonly CompiledRule[],
  own: ReadonlyMap<string, RuleGroup>,
  shared: RuleGroup,
  server: string,
): CompiledRule[] {
  return idsOf(rules, own, shared, server).map((id) => rules[id] as CompiledRule)
}

/** The numbers of rulesOf. */
function idsOf(
  rules: readonly CompiledRule[],
  own: ReadonlyMap<string, RuleGroup>,
  shared: RuleGroup,
  server: string,
): readonly number[] {
  const mine = own.get(server)?.ids ?? NONE
  const theirs = shared.ids.filter((id) => (rules[id] as CompiledRule).servers(server))
  return mergeAscending(mine, theirs)
}

/** The facts of `server`, whose rules are `rules` numbered `ids` (rulesOf). */
export function factsOf(
  rules: readonly CompiledRule[],
  own: ReadonlyMap<string, RuleGroup>,
  shared: RuleGroup,
  server: string,
): ServerFacts {
  return whole(factsIn(rules, idsOf(rules, own, shared, server), server))
}

/**
 * factsOf in steps (indexRules): a server every rule of a large policy applies to is 10,000
 * rules, 2–4 ms in one step.
 */
function* factsIn(
  rules: readonly CompiledRule[],
  ids: readonly number[],
  server: string,
): Generator<void, ServerFacts, void> {
  let identityDependent = false
  const conditions: string[] = []
  const everyone: string[] = []
  for (let i = 0; i < ids.length; i++) {
    const r = rules[ids[i] as number] as CompiledRule
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
