import fc from 'fast-check'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { McpTarget } from '../../../src/mcp/classify.js'
import type { PolicyCaller } from '../../../src/match/claims.js'
import {
  compileRule,
  RuleMemo,
  type CompiledRule,
  type TargetKind,
} from '../../../src/policy/compile.js'
import { Writes } from '../../../src/policy/copy-on-write.js'
import { one } from '../../../src/policy/pattern-index.js'
import { PolicySet, type PolicyMode } from '../../../src/policy/policy.js'
import { indexRules, type RuleIndex } from '../../../src/policy/rule-index.js'
import { policyFileSchema } from '../../../src/policy/schema.js'
import { ShardedMap } from '../../../src/policy/sharded-map.js'
import { whole } from '../../../src/policy/slices.js'
import { LinearPolicy } from './linear-policy.js'

/**
 * The differential property of the policy index (src/policy/rule-index.ts): over generated rule
 * sets, callers, servers, targets and arguments, every decision, list view, list filter key and
 * rule listing equals what a scan of every rule in order decides (linear-policy.ts). Names and
 * patterns are drawn from a few characters (a case variant, a non-ASCII letter, `*`) so that
 * literal, prefix, suffix and inner patterns collide often.
 *
 * Set MCP_EDGE_INDEX_SEED and MCP_EDGE_INDEX_RUNS to explore beyond CI.
 */

const SEED = Number(process.env.MCP_EDGE_INDEX_SEED ?? 20261202)
const RUNS = Number(process.env.MCP_EDGE_INDEX_RUNS ?? 300)

const chars = (alphabet: readonly string[], minLength: number) =>
  fc.array(fc.constantFrom(...alphabet), { minLength, maxLength: 3 }).map((cs) => cs.join(''))
const pattern = fc.oneof(fc.constant('*'), chars(['a', 'b', 'A', '*'], 1))
const name = fc.oneof(chars(['a', 'b', 'A'], 0), chars(['a', 'é', '_'], 1))
const patterns = fc.array(pattern, { maxLength: 3 })
/**
 * URIs of skills and their files (skill://, and another scheme a skill may be served under), so
 * that skill rules decide resources too (src/policy/skill-reach.ts): nested directories, a
 * SKILL.md at several depths, and patterns that match some of them.
 */
const uri = fc
  .tuple(
    fc.constantFrom('skill://', 'gh://'),
    fc.array(fc.constantFrom('a', 'b', 'A'), { minLength: 1, maxLength: 3 }),
    fc.constantFrom('SKILL.md', 'x.md', ''),
  )
  .map(([scheme, dirs, file]) => `${scheme}${dirs.join('/')}${file === '' ? '' : `/${file}`}`)
const uriPattern = fc.oneof(
  pattern,
  uri,
  uri.map((u) => u.replace(/[^/]*$/, '*')),
  fc.constantFrom('skill://*', 'skill://a/*', '*/SKILL.md', 'gh://a/*'),
)
const uriPatterns = fc.array(uriPattern, { maxLength: 3 })
const targets = fc.record(
  {
    tools: patterns,
    prompts: patterns,
    resources: uriPatterns,
    events: patterns,
    skills: uriPatterns,
    methods: patterns,
  },
  { requiredKeys: [] },
)
const claimValue = fc.constantFrom('g1', 'g2', 1, '1', true)
const claims = fc.dictionary(fc.constantFrom('groups', 'tier', 'org'), claimValue, {
  minKeys: 1,
  maxKeys: 2,
})
const clients = fc.array(fc.constantFrom('app', 'app*', '*', 'other', '*x'), {
  minLength: 1,
  maxLength: 2,
})
const when = fc.oneof(fc.record({ claims }), fc.record({ clients }), fc.record({ claims, clients }))
const CONDITIONS = [
  'args.x == 1.0',
  'has(args.y)',
  'args.q.size() < 3',
  'target.startsWith("a")',
  'claims.groups == "g1"',
]
const rule = fc.record({
  servers: fc.array(fc.constantFrom('s1', 's2', 's*', '*', 'x*', 'other'), {
    minLength: 1,
    maxLength: 2,
  }),
  when: fc.option(when, { nil: undefined }),
  allow: fc.option(targets, { nil: undefined }),
  deny: fc.option(targets, { nil: undefined }),
  mode: fc.constantFrom(undefined, 'enforce', 'dry-run'),
  condition: fc.option(fc.tuple(fc.constantFrom('if', 'unless'), fc.constantFrom(...CONDITIONS)), {
    nil: undefined,
  }),
})
type GeneratedRule = typeof rule extends fc.Arbitrary<infer R> ? R : never

const caller: fc.Arbitrary<PolicyCaller | undefined> = fc.option(
  fc
    .record(
      {
        groups: fc.oneof(claimValue, fc.array(claimValue, { maxLength: 3 })),
        tier: claimValue,
        org: fc.constantFrom('g1', 'g2', null),
        azp: fc.constantFrom('app', 'apx', 'x', '', null),
        client_id: fc.constantFrom('app', 'other'),
      },
      { requiredKeys: [] },
    )
    .map((claims) => ({ subject: 'sub', issuer: 'iss', claims })),
  { nil: undefined },
)
const KINDS: readonly TargetKind[] = ['tool', 'prompt', 'resource', 'event', 'skill', 'method']
const target: fc.Arbitrary<McpTarget> = fc
  .tuple(
    fc.constantFrom(...KINDS, 'tool', 'tool', 'resource', 'skill'),
    fc.oneof(name, uri),
    fc.boolean(),
  )
  .map(([kind, n, directory]) =>
    kind === 'resource'
      ? { kind, uri: n, ...(directory && { directory: true as const }) }
      : { kind, name: n },
  )
const args = fc.option(
  fc.record(
    { x: fc.constantFrom(1, 2, 'one'), y: fc.boolean(), q: fc.constantFrom('ab', 'abcd', 5) },
    { requiredKeys: [] },
  ),
  { nil: undefined },
)
const SERVERS = ['s1', 's2', 'x1', 'other']
/** The servers the policy is built for; `other` is looked up without precomputed facts. */
const CONFIGURED = ['s1', 's2', 'x1']

/** The generated rules compiled as the loader does, with one memo for the set. */
function compiled(generated: readonly GeneratedRule[], names = 'r'): CompiledRule[] {
  const raw = generated.map((g, i) => ({
    name: `${names}${i}`,
    servers: g.servers,
    ...(g.when && { when: g.when }),
    ...(g.allow && { allow: g.allow }),
    ...(g.deny && { deny: g.deny }),
    ...(g.allow === undefined && g.deny === undefined && { allow: {} }),
    ...(g.mode && { mode: g.mode }),
    ...(g.condition && { [g.condition[0]]: g.condition[1] }),
  }))
  return compiledRaw(raw)
}

/** Rules as written in a policy file, compiled with one memo for the set, as the loader does. */
function compiledRaw(raw: readonly object[]): CompiledRule[] {
  const file = policyFileSchema.parse({ rules: raw })
  // One memo for the set, as the loader compiles a policy: shared matchers decide the same.
  const memo = new RuleMemo()
  return (file.rules ?? []).map((r, i) => compileRule({ rule: r, source: `rules[${i}]` }, memo))
}

function policies(generated: readonly GeneratedRule[], mode: PolicyMode) {
  const rules = compiled(generated)
  return {
    indexed: new PolicySet(rules, mode, 'test', CONFIGURED),
    linear: new LinearPolicy(rules, mode),
  }
}

const LIST_OF: Partial<Record<TargetKind, [string, string, string]>> = {
  tool: ['tools/list', 'tools', 'name'],
  prompt: ['prompts/list', 'prompts', 'name'],
  resource: ['resources/list', 'resources', 'uri'],
  event: ['events/list', 'events', 'name'],
  skill: ['skills/list', 'skills', 'uri'],
}

type Policies = ReturnType<typeof policies>

/** Asserts that `indexed` decides everything as `linear` does, for these callers and calls. */
function decidesAsScan(
  { indexed, linear }: Policies,
  mode: PolicyMode,
  callers: readonly (PolicyCaller | undefined)[],
  calls: readonly (readonly [McpTarget, unknown])[],
): void {
  for (const server of SERVERS) {
    expect(indexed.hasConditions(server)).toBe(linear.hasConditions(server))
    for (const who of callers) {
      expect(indexed.rulesFor(who, server)).toEqual(linear.rulesFor(who, server))
      for (const [t, a] of calls)
        expect(indexed.check(who, server, t, a)).toEqual(linear.check(who, server, t, a))
      const filter = indexed.listFilter(who, server)
      if (mode === 'dry-run') {
        expect(filter).toBeUndefined()
        continue
      }
      expect(filter?.identityDependent).toBe(linear.identityDependent(server))
      for (const [kind, list] of Object.entries(LIST_OF)) {
        const [method, key, field] = list
        const names = calls.map(([t]) => (t.kind === 'resource' ? t.uri : t.name))
        const out = filter?.apply(method, { [key]: names.map((n) => ({ [field]: n })) })
        const shown = (out?.[key] as Record<string, string>[]).map((i) => i[field])
        const expected = names.filter((n) => linear.listed(who, server, kind as TargetKind, n))
        expect(shown).toEqual(expected)
      }
    }
    // Equal keys exactly when the same enforced rules judge the two callers' lists.
    if (mode === 'enforce') {
      for (const a of callers)
        for (const b of callers) {
          const same =
            JSON.stringify(linear.listRules(a, server).map((r) => r.id)) ===
            JSON.stringify(linear.listRules(b, server).map((r) => r.id))
          const ka = indexed.listFilter(a, server)?.key
          expect(ka === indexed.listFilter(b, server)?.key).toBe(same)
          expect(ka).not.toBe(indexed.listFilter(a, server === 's1' ? 's2' : 's1')?.key)
        }
    }
  }
}

describe('the policy index decides as a scan of every rule', () => {
  it('for every decision, list view, filter key and rule listing', () => {
    fc.assert(
      fc.property(
        fc.array(rule, { maxLength: 12 }),
        fc.constantFrom<PolicyMode>('enforce', 'enforce', 'dry-run'),
        fc.array(caller, { minLength: 2, maxLength: 3 }),
        fc.array(fc.tuple(target, args), { minLength: 1, maxLength: 6 }),
        (generated, mode, callers, calls) => {
          decidesAsScan(policies(generated, mode), mode, callers, calls)
        },
      ),
      { seed: SEED, numRuns: RUNS },
    )
  })

  it('after other policies were indexed (the lists of one rule every index shares)', () => {
    // Indexes share the list of each single rule number (pattern-index.ts `one`): a policy
    // indexed after another, whose rules of the same numbers file more names, must change
    // nothing the first one decides.
    fc.assert(
      fc.property(
        fc.array(rule, { maxLength: 8 }),
        fc.array(fc.array(rule, { maxLength: 8 }), { minLength: 1, maxLength: 3 }),
        fc.array(caller, { minLength: 2, maxLength: 3 }),
        fc.array(fc.tuple(target, args), { minLength: 1, maxLength: 6 }),
        (first, later, callers, calls) => {
          const kept = policies(first, 'enforce')
          for (const generated of later) policies(generated, 'enforce')
          decidesAsScan(kept, 'enforce', callers, calls)
        },
      ),
      { seed: SEED, numRuns: RUNS / 3 },
    )
  })

  it('shares lists of one rule frozen', () => {
    expect(Object.isFrozen(one(7))).toBe(true)
    expect(one(7)).toBe(one(7))
    expect(one(7)).toEqual([7])
    expect(one(3)).toEqual([3])
  })
})

/**
 * An index as plain data, to compare two of them whole: maps as entries sorted by key (a sharded
 * one too, whatever its shards), objects by their own fields (private ones too), functions (a
 * glob's matcher) by identity.
 */
function shape(x: unknown): unknown {
  if (x instanceof Map || x instanceof ShardedMap)
    return [...(x as Iterable<[unknown, unknown]>)]
      .map(([k, v]) => [JSON.stringify(shape(k)), shape(v)] as const)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  if (Array.isArray(x)) return x.map(shape)
  if (typeof x === 'function') {
    if (!FUNCTIONS.has(x)) FUNCTIONS.set(x, FUNCTIONS.size)
    return `function ${FUNCTIONS.get(x)}`
  }
  if (typeof x === 'object' && x !== null)
    return Object.fromEntries(
      Object.keys(x)
        .sort()
        .map((k) => [k, shape((x as Record<string, unknown>)[k])]),
    )
  return x
}
const FUNCTIONS = new Map<unknown, number>()

/** Every Map an index holds, however deep (a sharded map's shards included). */
function mapsIn(x: unknown, seen = new Set<unknown>(), out = new Set<Map<unknown, unknown>>()) {
  if (typeof x !== 'object' || x === null || seen.has(x)) return out
  seen.add(x)
  if (x instanceof Map) out.add(x as Map<unknown, unknown>)
  const values = x instanceof Map ? [...x.keys(), ...x.values()] : Object.values(x)
  for (const v of values) mapsIn(v, seen, out)
  return out
}

/** One edit of a reload: rules changed in place, and rules added at the end or dropped from it. */
const edit = fc.record({
  changed: fc.array(fc.tuple(fc.nat(), rule), { minLength: 1, maxLength: 4 }),
  ends: fc.oneof(fc.array(rule, { maxLength: 3 }), fc.nat(3)),
})
type Edit = typeof edit extends fc.Arbitrary<infer E> ? E : never

/**
 * `rules` after `e`: a rule it left as it was is the very same object, as a reload's reader hands
 * it back (running-rules.ts); a changed one compiled anew, with a memo of its own.
 */
function edited(rules: readonly CompiledRule[], e: Edit, round: number): CompiledRule[] {
  const next = [...rules]
  const fresh = compiled(
    [...e.changed.map(([, g]) => g), ...(typeof e.ends === 'number' ? [] : e.ends)],
    `e${round}.`,
  )
  e.changed.forEach(([at], i) => {
    if (next.length > 0) next[at % next.length] = fresh[i] as CompiledRule
  })
  if (typeof e.ends === 'number') next.length = Math.max(0, next.length - e.ends)
  else next.push(...fresh.slice(e.changed.length))
  return next
}

describe("a reload's patch of the running index", () => {
  afterEach(() => {
    vi.restoreAllMocks()
  })

  it('is the index a build makes, decides as a scan, and leaves every running index as it was', () => {
    fc.assert(
      fc.property(
        fc.array(rule, { maxLength: 12 }),
        fc.array(edit, { minLength: 1, maxLength: 3 }),
        fc.constantFrom<PolicyMode>('enforce', 'enforce', 'dry-run'),
        fc.array(caller, { minLength: 2, maxLength: 3 }),
        fc.array(fc.tuple(target, args), { minLength: 1, maxLength: 6 }),
        (first, edits, mode, callers, calls) => {
          const patches = vi.spyOn(Writes, 'patch')
          patches.mockClear()
          let running = new PolicySet(compiled(first), mode, 'test', CONFIGURED)
          const earlier: { policy: PolicySet; shape: unknown }[] = []
          edits.forEach((e, round) => {
            earlier.push({ policy: running, shape: shape(running.index) })
            const rules = edited(running.rules, e, round)
            const patched: RuleIndex = whole(indexRules(rules, CONFIGURED, [], running))
            expect(shape(patched)).toEqual(shape(whole(indexRules(rules, CONFIGURED, []))))
            running = new PolicySet(rules, mode, 'test', CONFIGURED, [], patched)
            decidesAsScan(
              { indexed: running, linear: new LinearPolicy(rules, mode) },
              mode,
              callers,
              calls,
            )
            // SECURITY: a policy a reload replaced, still serving or kept after a failed reload,
            // is the same index, whole, after every patch made from it or its successors.
            for (const { policy, shape: was } of earlier) expect(shape(policy.index)).toEqual(was)
          })
          // At most 16 changed rules of at most 21: every edit was a patch, none a build.
          expect(patches).toHaveBeenCalledTimes(edits.length)
        },
      ),
      { seed: SEED, numRuns: RUNS / 2 },
    )
  })

  it('copies only the shards of the keys an edit touched, to the same index', () => {
    // 3,000 names, heads, tails and claim values on one server: each of those maps is sharded
    // (sharded-map.ts), and an edit of four rules copies the shards of their keys alone.
    const team = (i: number, edit = '') => ({
      name: `team-${i}${edit}`,
      servers: ['s1'],
      when: { claims: { groups: `team-${i}` } },
      allow: { tools: [`t${i}_*`, `team${i}_report${edit}`, `*_${i}${edit}`] },
    })
    const rules = compiledRaw(Array.from({ length: 3000 }, (_, i) => team(i)))
    const running = new PolicySet(rules, 'enforce', 'test', CONFIGURED)
    const was = shape(running.index)
    const changedAt = [0, 1024, 1025, 2999]
    const changed = compiledRaw(changedAt.map((i) => team(i, '-edited')))
    const next = [...rules]
    changedAt.forEach((at, k) => (next[at] = changed[k] as CompiledRule))
    const patched = whole(indexRules(next, CONFIGURED, [], running))
    expect(shape(patched)).toEqual(shape(whole(indexRules(next, CONFIGURED, []))))
    expect(shape(running.index)).toEqual(was)
    // Every map the patch holds that the running index does not is a shard it copied or made:
    // a few hundred entries at most, never one of the 3,000-entry maps whole.
    const before = mapsIn(running.index)
    const made = [...mapsIn(patched)].filter((m) => !before.has(m))
    expect(made.length).toBeGreaterThan(0)
    expect(Math.max(...made.map((m) => m.size))).toBeLessThanOrEqual(512)
    expect([...before].some((m) => m.size >= 2900)).toBe(false)
    const policy = new PolicySet(next, 'enforce', 'test', CONFIGURED, [], patched)
    const caller = (g: string) => ({ subject: 's', issuer: 'i', claims: { groups: g } })
    const allowed = (g: string, tool: string) =>
      policy.check(caller(g), 's1', { kind: 'tool', name: tool }).allow
    expect(allowed('team-1024', 'team1024_report-edited')).toBe(true)
    expect(allowed('team-1024', 'team1024_report')).toBe(false)
    expect(allowed('team-1024', 'x_1024-edited')).toBe(true)
    expect(allowed('team-1023', 'team1023_report')).toBe(true)
    expect(allowed('team-1023', 'team1024_report-edited')).toBe(false)
  })

  it('builds instead when a rule added before others moved more than a patch is worth', () => {
    const generated = (servers: GeneratedRule['servers']): GeneratedRule => ({
      servers,
      when: undefined,
      allow: { tools: ['a*'] },
      deny: undefined,
      mode: undefined,
      condition: undefined,
    })
    const rules = compiled(Array.from({ length: 40 }, () => generated(['s1', 's*'])))
    const running = new PolicySet(rules, 'enforce', 'test', CONFIGURED)
    const patches = vi.spyOn(Writes, 'patch')
    const moved = [...compiled([generated(['s2'])], 'n'), ...rules]
    const index = whole(indexRules(moved, CONFIGURED, [], running))
    expect(patches).not.toHaveBeenCalled()
    expect(shape(index)).toEqual(shape(whole(indexRules(moved, CONFIGURED, []))))
  })

  it('refuses to change an index it did not copy', () => {
    const [r] = compiled([
      {
        servers: ['s1'],
        when: undefined,
        allow: { tools: ['a'] },
        deny: undefined,
        mode: undefined,
        condition: undefined,
      },
    ])
    const running = new PolicySet([r as CompiledRule], 'enforce', 'test', CONFIGURED)
    const group = running.index.own.get('s1')
    expect(() => group?.remove(r as CompiledRule, 0, Writes.patch())).toThrow(/did not copy/)
    expect(running.check(undefined, 's1', { kind: 'tool', name: 'a' }).allow).toBe(true)
  })
})
