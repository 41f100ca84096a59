import type { GatewayConfig, ServerConfig } from '../config/schema.js'
import type { CompiledLimit } from '../limits/rules.js'
import type { CompiledRule } from '../policy/compile.js'
import type { PolicySet } from '../policy/policy.js'

/**
 * What the running config sets up, for the status page's "configuration" section
 * (docs/operations.md §Status page): servers and how they are reached, virtual servers, the
 * policy files' rules and limits. Plain JSON, bounded, and free of secrets: no header values,
 * credentials, Redis URLs, keys or token settings, only their presence; replica addresses are
 * on the replica rows (origin and path).
 */
export interface ConfiguredView {
  readonly servers: readonly ServerView[]
  readonly virtualServers: readonly VirtualView[]
  /** Null without `policies:`. */
  readonly policies: {
    readonly mode: 'enforce' | 'dry-run'
    readonly rules: readonly RuleView[]
    readonly limits: readonly LimitView[]
    /** Rules and limits past the bound, not listed. */
    readonly omitted: number
  } | null
  /** Null without `cache:`. */
  readonly cache: {
    readonly maxBytes: number
    readonly maxEntryBytes: number
    readonly maxTtlMs: number
    readonly private: boolean
    readonly staleIfErrorMs: number
    readonly shared: boolean
  } | null
  /** Where the policy files' limits are counted; null without `rateLimits:`. */
  readonly rateLimits: { readonly redis: boolean; readonly replicas: number } | null
}

export interface ServerView {
  readonly name: string
  readonly replicas: number
  readonly weights: readonly number[]
  /** `least-request`, `round-robin`, or `hash header:X-Tenant`. */
  readonly balance: string
  readonly trustHeaders: boolean
  readonly legacyClients: 'allow' | 'reject'
  readonly timeouts: {
    readonly connectMs: number
    readonly responseHeadersMs: number
    readonly streamIdleMs: number
  }
  /** `timeouts.methods`, `.tools`, `.prompts`: own deadlines by name or pattern. */
  readonly deadlines: readonly {
    readonly kind: 'methods' | 'tools' | 'prompts'
    readonly name: string
    readonly ms: number
  }[]
  readonly retry: {
    readonly attempts: number
    readonly budgetPercent: number
    readonly backoffBaseMs: number
    readonly perTryTimeoutMs: number | null
  }
  /** Null: no active health checks (replicas are judged by their traffic alone). */
  readonly healthCheck: {
    readonly intervalMs: number
    readonly timeoutMs: number
    readonly unhealthyAfter: number
    readonly healthyAfter: number
  } | null
  readonly outlier: {
    readonly consecutiveFailures: number
    readonly baseEjectionMs: number
    readonly maxEjectionMs: number
  }
  readonly maxInFlight: number
  readonly maxStreams: number
  /** Tool-aware routes: what each names and how many replicas it sends to. */
  readonly routes: readonly { readonly names: readonly string[]; readonly replicas: number }[]
  readonly requiredScopes: readonly string[]
  /** Null: any client application. */
  readonly clients: readonly string[] | null
  readonly tokenExchange: boolean
  /** Curated tools and prompts (renamed, rewritten or hidden). */
  readonly curated: number
}

interface VirtualView {
  readonly name: string
  readonly members: readonly string[]
  readonly prefix: 'never' | 'onCollision' | 'always'
  readonly fanOutTimeoutMs: number
  readonly resources: readonly { readonly pattern: string; readonly member: string }[]
}

export interface RuleView {
  readonly name: string
  readonly source: string
  readonly servers: readonly string[]
  /** `tools: get_*, slow_forecast` per kind the rule allows (or denies). */
  readonly allow: readonly string[]
  readonly deny: readonly string[]
  /** Whether it applies only to some callers (`when:`). */
  readonly when: boolean
  /** `if: …` or `unless: …`, bounded; null without a condition. */
  readonly condition: string | null
  readonly dryRun: boolean
}

export interface LimitView {
  readonly name: string
  readonly source: string
  readonly servers: readonly string[]
  /** `tools: get_alerts` per kind the limit counts. */
  readonly counts: readonly string[]
  /** `ip`, `claim:sub`, `header:X-Tenant`, `none`. */
  readonly key: string
  /** `3/minute` (burst) or null for a concurrency limit. */
  readonly rate: string | null
  readonly burst: number | null
  readonly concurrency: number | null
  readonly when: boolean
}

/** Rules and limits listed; a policy with more (no real one has) says how many were left out. */
const MAX_ENTRIES = 200
/** Patterns listed per list; the rest are counted in the text (`+3 more`). */
const MAX_PATTERNS = 12
/** Longest text kept of a pattern or a condition. */
const MAX_TEXT = 200

export function configuredView(
  config: GatewayConfig,
  policy: PolicySet | undefined,
): ConfiguredView {
  const rules = policy?.rules ?? []
  const limits = policy?.limits ?? []
  const c = config.cache
  return {
    servers: Object.entries(config.servers).map(([name, s]) => serverView(name, s)),
    virtualServers: Object.entries(config.virtualServers).map(([name, v]) => ({
      name,
      members: v.members,
      prefix: v.prefix,
      fanOutTimeoutMs: v.fanOutTimeoutMs,
      resources: Object.entries(v.resources).map(([pattern, member]) => ({
        pattern: cut(pattern),
        member,
      })),
    })),
    policies:
      policy === undefined
        ? null
        : {
            mode: policy.mode,
            rules: rules.slice(0, MAX_ENTRIES).map(ruleView),
            limits: limits.slice(0, MAX_ENTRIES).map(limitView),
            omitted:
              Math.max(0, rules.length - MAX_ENTRIES) + Math.max(0, limits.length - MAX_ENTRIES),
          },
    cache:
      c === undefined
        ? null
        : {
            maxBytes: c.maxBytes,
            maxEntryBytes: c.maxEntryBytes,
            maxTtlMs: c.maxTtlMs,
            private: c.private,
            staleIfErrorMs: c.staleIfErrorMs,
            // SECURITY: whether there is a shared tier, never its URL (it may hold a password).
            shared: c.redis !== undefined,
          },
    rateLimits:
      config.rateLimits === undefined
        ? null
        : { redis: config.rateLimits.redis !== undefined, replicas: config.rateLimits.replicas },
  }
}

function serverView(name: string, s: ServerConfig): ServerView {
  const t = s.timeouts
  const deadlines = (['methods', 'tools', 'prompts'] as const).flatMap((kind) =>
    Object.entries(t[kind] ?? {}).map(([n, ms]) => ({ kind, name: cut(n), ms })),
  )
  return {
    name,
    replicas: s.upstreams.length,
    weights: s.upstreams.map((u) => u.weight),
    balance: typeof s.balance === 'string' ? s.balance : `hash ${s.balance.hash}`,
    trustHeaders: s.trustHeaders,
    legacyClients: s.legacyClients,
    timeouts: {
      connectMs: t.connectMs,
      responseHeadersMs: t.responseHeadersMs,
      streamIdleMs: t.streamIdleMs,
    },
    deadlines,
    retry: {
      attempts: s.retry.attempts,
      budgetPercent: s.retry.budgetPercent,
      backoffBaseMs: s.retry.backoffBaseMs,
      perTryTimeoutMs: s.retry.perTryTimeoutMs ?? null,
    },
    healthCheck: s.healthCheck === undefined ? null : { ...s.healthCheck },
    outlier: { ...s.outlier },
    maxInFlight: s.maxInFlight,
    maxStreams: s.maxStreams,
    routes: s.routes.map((r) => ({
      names: kinds({ tools: r.tools, prompts: r.prompts, resources: r.resources }),
      replicas: r.upstreams.length,
    })),
    requiredScopes: s.requiredScopes,
    clients: s.clients ?? null,
    tokenExchange: s.tokenExchange !== undefined,
    curated: Object.keys(s.tools).length + Object.keys(s.prompts).length,
  }
}

function ruleView(r: CompiledRule): RuleView {
  const c = r.condition
  return {
    name: r.name,
    source: r.source,
    servers: bounded(r.serverPatterns),
    allow: kinds(plural(r.allow)),
    deny: kinds(plural(r.deny)),
    when: r.whenSpec !== undefined,
    condition: c === undefined ? null : cut(`${c.kind}: ${c.source}`),
    dryRun: r.dryRun,
  }
}

function limitView(l: CompiledLimit): LimitView {
  const c = l.config
  return {
    name: l.name,
    source: l.source,
    servers: bounded(c.servers),
    counts: kinds({
      methods: c.methods,
      tools: c.tools,
      prompts: c.prompts,
      resources: c.resources,
      events: c.events,
    }),
    key: c.key,
    rate: c.rate ?? null,
    burst: l.rate?.burst ?? null,
    concurrency: c.concurrency ?? null,
    when: c.when !== undefined,
  }
}

/** A rule's targets by kind as its file names them (`tool` → `tools`). */
function plural(
  t: Readonly<Partial<Record<string, readonly string[]>>>,
): Record<string, readonly string[] | undefined> {
  return Object.fromEntries(Object.entries(t).map(([k, v]) => [`${k}s`, v]))
}

/** `tools: get_*, slow_forecast` per kind that has patterns. */
function kinds(by: Readonly<Record<string, readonly string[] | undefined>>): string[] {
  return Object.entries(by)
    .filter((e): e is [string, readonly string[]] => e[1] !== undefined && e[1].length > 0)
    .map(([kind, p]) => `${kind}: ${bounded(p).join(', ')}`)
}

function bounded(patterns: readonly string[]): string[] {
  const shown = patterns.slice(0, MAX_PATTERNS).map(cut)
  if (patterns.length > MAX_PATTERNS) shown.push(`+${patterns.length - MAX_PATTERNS} more`)
  return shown
}

function cut(text: string): string {
  return text.length <= MAX_TEXT ? text : `${text.slice(0, MAX_TEXT)}…`
}
