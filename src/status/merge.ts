import { RECENT_DENIALS, type DenialRecord } from './denials.js'
import { topLimited, type LimitedRecord } from './limited.js'
import type {
  CacheReport,
  CatalogReport,
  NameSets,
  ProcessReport,
  ReplicaReport,
  ReplicaState,
  ServerReport,
  SharedTierReport,
  UpstreamOutReport,
  VirtualReport,
} from './report.js'

/** The reports of every process of one gateway (one, or the workers of a primary), as one. */
export interface MergedReport extends Omit<ProcessReport, 'pid' | 'cache'> {
  readonly pids: readonly number[]
  /** False while workers run different configs (a reload reaching them one after another). */
  readonly configAgrees: boolean
  readonly cache: (CacheReport & { readonly sharedTier: MergedSharedTier | null }) | null
}

/** The shared tier over workers: the worst state any has, and how many are in each. */
export interface MergedSharedTier extends SharedTierReport {
  readonly workers: Readonly<Record<string, number>>
}

/** Worse first: what a merged replica or shared tier shows when workers disagree. */
const REPLICA_ORDER: readonly ReplicaState[] = ['unhealthy', 'ejected', 'draining', 'healthy']
const TIER_ORDER = ['bypassed', 'connecting', 'connected']

/**
 * Sums what adds up (in-flight requests, cache entries and bytes, denials per rule), keeps the
 * worst of states (a replica out in one worker is out), unites names and warnings, and keeps the
 * newest of what is "last" (a health check, a reload, the 100 latest denials).
 */
export function mergeReports(reports: readonly ProcessReport[]): MergedReport {
  const first = reports[0]
  if (first === undefined) throw new Error('mergeReports: no report')
  const latestConfig = reports.reduce((a, b) => (b.config.loadedAt > a.config.loadedAt ? b : a))
  const reloads = reports.flatMap((r) => (r.lastReload === null ? [] : [r.lastReload]))
  return {
    pids: reports.map((r) => r.pid),
    startedAt: Math.min(...reports.map((r) => r.startedAt)),
    draining: reports.some((r) => r.draining),
    config: latestConfig.config,
    configAgrees: reports.every((r) => r.config.digest === first.config.digest),
    lastReload: reloads.reduce<(typeof reloads)[number] | null>(
      (a, b) => (a === null || b.at > a.at ? b : a),
      null,
    ),
    warnings: unique(reports.flatMap((r) => r.warnings)),
    upstreamsOut: uniqueBy(
      reports.flatMap((r) => r.upstreamsOut),
      (o: UpstreamOutReport) => `${o.server} ${o.upstream} ${o.state}`,
    ),
    servers: mergeServers(reports.map((r) => r.servers)),
    virtualServers: uniqueBy(
      reports.flatMap((r) => r.virtualServers),
      (v: VirtualReport) => v.name,
    ).map((v) => ({
      ...v,
      problems: unique(
        reports
          .flatMap((r) => r.virtualServers.filter((x) => x.name === v.name))
          .flatMap((x) => x.problems),
      ),
    })),
    cache: mergeCache(reports.map((r) => r.cache)),
    catalog: mergeCatalog(reports.map((r) => r.catalog)),
    denials: reports
      .flatMap((r) => r.denials)
      .sort((a: DenialRecord, b: DenialRecord) => b.at.localeCompare(a.at))
      .slice(0, RECENT_DENIALS),
    denialsByRule: sumRecords(reports.map((r) => r.denialsByRule)),
    ruleHits: sumRecords(reports.map((r) => r.ruleHits)),
    limited: mergeLimited(reports.flatMap((r) => r.limited)),
    // The newest config's: while workers disagree (configAgrees) the page says so.
    configured: latestConfig.configured,
  }
}

function mergeServers(lists: readonly (readonly ServerReport[])[]): ServerReport[] {
  const out = new Map<string, Map<string, ReplicaReport>>()
  for (const list of lists) {
    for (const s of list) {
      let replicas = out.get(s.name)
      if (replicas === undefined) out.set(s.name, (replicas = new Map()))
      for (const r of s.replicas) {
        const seen = replicas.get(r.id)
        replicas.set(r.id, seen === undefined ? r : mergeReplica(seen, r))
      }
    }
  }
  return [...out].map(([name, replicas]) => ({ name, replicas: [...replicas.values()] }))
}

function mergeReplica(a: ReplicaReport, b: ReplicaReport): ReplicaReport {
  const worse = REPLICA_ORDER.indexOf(b.state) < REPLICA_ORDER.indexOf(a.state) ? b : a
  const checks = [a.lastCheck, b.lastCheck].filter((c) => c !== null)
  return {
    ...worse,
    inFlight: a.inFlight + b.inFlight,
    streams: a.streams + b.streams,
    lastCheck: checks.reduce<ReplicaReport['lastCheck']>(
      (x, y) => (x === null || y.at > x.at ? y : x),
      null,
    ),
    outInWorkers: a.outInWorkers + b.outInWorkers,
  }
}

function mergeCache(caches: readonly (CacheReport | null)[]): MergedReport['cache'] {
  const present = caches.filter((c): c is CacheReport => c !== null)
  if (present.length === 0) return null
  const tiers = present.flatMap((c) => (c.sharedTier === null ? [] : [c.sharedTier]))
  let sharedTier: MergedSharedTier | null = null
  if (tiers.length > 0) {
    const counts = new Map<string, number>()
    for (const t of tiers) counts.set(t.state, (counts.get(t.state) ?? 0) + 1)
    const workers = Object.fromEntries(counts)
    const rank = (t: SharedTierReport): number => {
      const i = TIER_ORDER.indexOf(t.state)
      return i === -1 ? 0 : i
    }
    const worst = tiers.reduce((a, b) => (rank(b) < rank(a) ? b : a))
    sharedTier = { ...worst, workers }
  }
  return {
    entries: present.reduce((n, c) => n + c.entries, 0),
    bytes: present.reduce((n, c) => n + c.bytes, 0),
    maxBytes: present.reduce((n, c) => n + c.maxBytes, 0),
    sharedTier,
  }
}

function mergeCatalog(lists: readonly (readonly CatalogReport[])[]): CatalogReport[] {
  const out = new Map<string, CatalogReport>()
  for (const list of lists) {
    for (const c of list) {
      const seen = out.get(c.server)
      out.set(
        c.server,
        seen === undefined
          ? c
          : {
              ...seen,
              tools: uniteSets(seen.tools, c.tools),
              prompts: uniteSets(seen.prompts, c.prompts),
              skills: uniteSets(seen.skills, c.skills),
              instructions:
                seen.instructions === 'drifted' || c.instructions === 'drifted'
                  ? 'drifted'
                  : seen.instructions,
              omitted: Math.max(seen.omitted, c.omitted),
            },
      )
    }
  }
  return [...out.values()]
}

function uniteSets(a: NameSets, b: NameSets): NameSets {
  return {
    pinned: unique([...a.pinned, ...b.pinned]),
    drifted: unique([...a.drifted, ...b.drifted]),
    new: unique([...a.new, ...b.new]),
    hidden: unique([...a.hidden, ...b.hidden]),
  }
}

function mergeLimited(records: readonly LimitedRecord[]): LimitedRecord[] {
  const out = new Map<string, LimitedRecord>()
  for (const r of records) {
    const id = `${r.limit}\n${r.key}\n${r.caller}`
    const seen = out.get(id)
    out.set(
      id,
      seen === undefined
        ? r
        : {
            ...seen,
            refused: seen.refused + r.refused,
            lastAt: r.lastAt > seen.lastAt ? r.lastAt : seen.lastAt,
          },
    )
  }
  return topLimited([...out.values()])
}

/** Keys are names from config and policy files: summed in a Map, never as object properties. */
function sumRecords(records: readonly Readonly<Record<string, number>>[]): Record<string, number> {
  const out = new Map<string, number>()
  for (const r of records) for (const [k, v] of Object.entries(r)) out.set(k, (out.get(k) ?? 0) + v)
  return Object.fromEntries(out)
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)]
}

function uniqueBy<T>(values: readonly T[], key: (v: T) => string): T[] {
  const out = new Map<string, T>()
  for (const v of values) if (!out.has(key(v))) out.set(key(v), v)
  return [...out.values()]
}
