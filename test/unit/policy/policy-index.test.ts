import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { McpTarget } from '../../../src/mcp/classify.js'
import type { PolicyCaller } from '../../../src/match/claims.js'
import { compileRule, RuleMemo, type TargetKind } from '../../../src/policy/compile.js'
import { one } from '../../../src/policy/pattern-index.js'
import { PolicySet, type PolicyMode } from '../../../src/policy/policy.js'
import { policyFileSchema } from '../../../src/policy/schema.js'
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

function policies(generated: readonly GeneratedRule[], mode: PolicyMode) {
  const raw = generated.map((g, i) => ({
    name: `r${i}`,
    servers: g.servers,
    ...(g.when && { when: g.when }),
    ...(g.allow && { allow: g.allow }),
    ...(g.deny && { deny: g.deny }),
    ...(g.allow === undefined && g.deny === undefined && { allow: {} }),
    ...(g.mode && { mode: g.mode }),
    ...(g.condition && { [g.condition[0]]: g.condition[1] }),
  }))
  const file = policyFileSchema.parse({ rules: raw })
  // One memo for the set, as the loader compiles a policy: shared matchers decide the same.
  const memo = new RuleMemo()
  const rules = (file.rules ?? []).map((r, i) =>
    compileRule({ rule: r, source: `rules[${i}]` }, memo),
  )
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
