import type { ConfiguredView, LimitView, RuleView } from './configured.js'
import type { DenialRecord } from './denials.js'
import type { LimitedRecord } from './limited.js'
import type { MergedReport, MergedSharedTier } from './merge.js'
import type { Reading } from './reading.js'
import type {
  CatalogReport,
  ConfigReport,
  ReloadReport,
  ReplicaReport,
  UpstreamOutReport,
} from './report.js'
import {
  HISTORY_MS,
  SAMPLE_MS,
  WINDOWS,
  cacheBetween,
  hitRatio,
  history,
  round,
  toolsBetween,
  trafficBetween,
  type HistoryPoint,
  type ReadingRing,
  type ToolWindow,
  type TrafficWindow,
  type WindowName,
} from './windows.js'

/** Version of status.json's shape: a field is never renamed or removed without a new one. */
const STATUS_SCHEMA = 1

/** status.json (docs/operations.md §status.json lists every field). */
export interface StatusDocument {
  readonly schema: typeof STATUS_SCHEMA
  readonly generatedAt: string
  readonly gateway: {
    readonly version: string
    readonly startedAt: string
    readonly uptimeSeconds: number
    readonly workers: {
      readonly configured: number
      readonly reporting: number
      readonly pids: readonly number[]
    }
    readonly draining: boolean
    readonly config: ConfigReport & { readonly workersAgree: boolean }
    readonly lastReload: ReloadReport | null
    readonly warnings: readonly string[]
  }
  readonly servers: readonly {
    readonly name: string
    readonly replicas: readonly ReplicaReport[]
    readonly traffic: Readonly<Record<WindowName, TrafficWindow>>
    readonly tools: ToolTable
  }[]
  readonly virtualServers: readonly {
    readonly name: string
    readonly members: readonly string[]
    readonly problems: readonly string[]
    readonly traffic: Readonly<Record<WindowName, TrafficWindow>>
    readonly tools: ToolTable
  }[]
  readonly cache: {
    readonly entries: number
    readonly bytes: number
    readonly maxBytes: number
    readonly sharedTier: MergedSharedTier | null
    readonly events: Readonly<Record<string, number>>
    readonly hitRatio: Readonly<Record<WindowName | 'total', number | null>>
    readonly byServerMethod: readonly {
      readonly server: string
      readonly method: string
      readonly hits: number
      /** Answered by the backend with an answer the cache could have kept. */
      readonly misses: number
      /** Answered by the backend with an answer it could not keep, in all and by reason. */
      readonly notCacheable: number
      readonly notCacheableBy: Readonly<Record<string, number>>
      /** hits over hits and misses: answers it could not keep are left out. */
      readonly hitRatio: number | null
    }[]
  } | null
  readonly policy: {
    readonly mode: 'enforce' | 'dry-run'
    readonly policyId: string | null
    readonly denials: readonly DenialRecord[]
    readonly byRule: readonly { readonly rule: string; readonly denials: number }[]
  }
  readonly rateLimits: {
    readonly refused: readonly {
      readonly limit: string
      readonly refused: number
      readonly tableFull: number
    }[]
    readonly limited: readonly LimitedRecord[]
  }
  readonly catalog: readonly CatalogReport[]
  /** What the running config sets up, with each rule's and limit's counts since start. */
  readonly configuration: Configuration
  readonly history: {
    readonly sampleSeconds: number
    readonly windowSeconds: number
    readonly servers: readonly { readonly name: string; readonly points: readonly HistoryPoint[] }[]
  }
}

/** A server's `tools/call` operations per tool over the last `seconds` (5 to 6 minutes). */
export interface ToolTable {
  readonly seconds: number
  readonly rows: readonly ToolWindow[]
}

/** configured.ts ConfiguredView with the counts of its rules and limits. */
interface Configuration extends Omit<ConfiguredView, 'policies'> {
  readonly policies:
    | (Omit<NonNullable<ConfiguredView['policies']>, 'rules' | 'limits'> & {
        /** `hits`: decisions this rule made since start; `denials`: of those, denials. */
        readonly rules: readonly (RuleView & { readonly hits: number; readonly denials: number })[]
        /** `refused`: 429s since start. */
        readonly limits: readonly (LimitView & { readonly refused: number })[]
      })
    | null
}

/** What the document is built from, besides the reports and readings. */
export interface GatewayFacts {
  readonly version: string
  readonly workers: number
  /** Warnings of the gateway as a whole (the admin listener's exposure). */
  readonly warnings: readonly string[]
}

/** status.json from the merged reports, the current reading and the kept ones. */
export function statusDocument(
  facts: GatewayFacts,
  merged: MergedReport,
  now: Reading,
  ring: ReadingRing,
): StatusDocument {
  const traffic = (name: string): Record<WindowName, TrafficWindow> => ({
    '1m': trafficBetween(ring.baseline(now.at, WINDOWS['1m']), now, name),
    '5m': trafficBetween(ring.baseline(now.at, WINDOWS['5m']), now, name),
  })
  const toolBase = ring.toolBaseline(now.at, WINDOWS['5m'])
  const tools = (name: string): ToolTable => ({
    seconds: Math.max(0, Math.round((now.at - toolBase.at) / 1000)),
    rows: toolsBetween(toolBase, now, name),
  })
  const readings = [...ring.all().filter((r) => r.at < now.at), now]
  const charted = [
    ...merged.servers.map((s) => s.name),
    ...merged.virtualServers.map((v) => v.name),
  ]
  return {
    schema: STATUS_SCHEMA,
    generatedAt: new Date(now.at).toISOString(),
    gateway: {
      version: facts.version,
      startedAt: new Date(merged.startedAt).toISOString(),
      uptimeSeconds: Math.max(0, Math.round((now.at - merged.startedAt) / 1000)),
      workers: { configured: facts.workers, reporting: merged.pids.length, pids: merged.pids },
      draining: merged.draining,
      config: { ...merged.config, workersAgree: merged.configAgrees },
      lastReload: merged.lastReload,
      warnings: [...facts.warnings, ...merged.warnings],
    },
    servers: merged.servers.map((s) => ({ ...s, traffic: traffic(s.name), tools: tools(s.name) })),
    virtualServers: merged.virtualServers.map((v) => ({
      ...v,
      traffic: traffic(v.name),
      tools: tools(v.name),
    })),
    cache: cacheSection(merged, now, ring),
    policy: {
      mode: merged.config.policyMode,
      policyId: merged.config.policyId,
      denials: merged.denials,
      byRule: Object.entries(merged.denialsByRule)
        .map(([rule, denials]) => ({ rule, denials }))
        .sort((a, b) => b.denials - a.denials || a.rule.localeCompare(b.rule)),
    },
    rateLimits: {
      refused: [...now.rateLimited]
        .map(([limit, refused]) => ({ limit, refused, tableFull: now.tableFull.get(limit) ?? 0 }))
        .sort((a, b) => b.refused - a.refused || a.limit.localeCompare(b.limit)),
      limited: merged.limited,
    },
    catalog: merged.catalog,
    configuration: configuration(merged, now),
    history: {
      sampleSeconds: SAMPLE_MS / 1000,
      windowSeconds: HISTORY_MS / 1000,
      servers: charted.map((name) => ({ name, points: history(readings, name) })),
    },
  }
}

function cacheSection(
  merged: MergedReport,
  now: Reading,
  ring: ReadingRing,
): StatusDocument['cache'] {
  const c = merged.cache
  if (c === null) return null
  const first = ring.all()[0] as Reading
  const byServerMethod = [...now.cache].flatMap(([server, methods]) =>
    [...methods].map(([method, counts]) => {
      const w = cacheBetween(undefined, counts)
      return {
        server,
        method,
        ...w,
        hitRatio: w.hits + w.misses > 0 ? round(w.hits / (w.hits + w.misses), 4) : null,
      }
    }),
  )
  return {
    entries: c.entries,
    bytes: c.bytes,
    maxBytes: c.maxBytes,
    sharedTier: c.sharedTier,
    events: Object.fromEntries(now.cacheEvents),
    hitRatio: {
      '1m': hitRatio(ring.baseline(now.at, WINDOWS['1m']), now),
      '5m': hitRatio(ring.baseline(now.at, WINDOWS['5m']), now),
      total: hitRatio(first, now),
    },
    byServerMethod: byServerMethod.sort(
      (a, b) => a.server.localeCompare(b.server) || a.method.localeCompare(b.method),
    ),
  }
}

/** The running config's view, with the counts since start of each rule and limit. */
function configuration(merged: MergedReport, now: Reading): Configuration {
  const c = merged.configured
  const p = c.policies
  if (p === null) return { ...c, policies: null }
  // Rule names are the policy author's text: read as own keys only (`constructor` is a name too).
  const own = (r: Readonly<Record<string, number>>, k: string): number =>
    Object.hasOwn(r, k) ? (r[k] ?? 0) : 0
  const denialsOf = (rule: string): number =>
    ['', ' (if)', ' (unless)'].reduce((n, s) => n + own(merged.denialsByRule, `${rule}${s}`), 0)
  return {
    ...c,
    policies: {
      ...p,
      rules: p.rules.map((r) => ({
        ...r,
        hits: own(merged.ruleHits, r.name),
        denials: denialsOf(r.name),
      })),
      limits: p.limits.map((l) => ({ ...l, refused: now.rateLimited.get(l.name) ?? 0 })),
    },
  }
}

/** /readyz on the admin listener: readiness and everything behind it (docs/operations.md). */
export interface AdminReadiness {
  readonly ready: boolean
  readonly draining: boolean
  readonly problems: readonly string[]
  readonly warnings: readonly string[]
  readonly upstreamsOut: readonly UpstreamOutReport[]
  /** Whether the shared (Redis) cache tier is in use; null without `cache.redis`. */
  readonly sharedCache: MergedSharedTier | null
  readonly workers: { readonly configured: number; readonly reporting: number }
}

export function adminReadiness(facts: GatewayFacts, merged: MergedReport): AdminReadiness {
  const problems = merged.draining ? ['draining'] : []
  return {
    ready: problems.length === 0,
    draining: merged.draining,
    problems,
    warnings: [...facts.warnings, ...merged.warnings],
    upstreamsOut: merged.upstreamsOut,
    sharedCache: merged.cache?.sharedTier ?? null,
    workers: { configured: facts.workers, reporting: merged.pids.length },
  }
}
