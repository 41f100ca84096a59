import { lockOf } from '../catalog/config.js'
import type { RuntimeRef } from '../runtime/ref.js'
import { catalogWarnings, replicasOut, type GatewayRuntime } from '../runtime/runtime.js'
import type { Upstream } from '../upstream/upstream.js'
import type { ConfigRecord } from './config-record.js'
import { configuredView, type ConfiguredView } from './configured.js'
import type { DenialLog } from './denials.js'
import { replicaKey, type HealthLog } from './health-log.js'
import type { LimitedCallers } from './limited.js'
import type {
  CacheReport,
  CatalogReport,
  NameSets,
  ProcessReport,
  ReplicaReport,
  SharedTierReport,
  VirtualReport,
} from './report.js'

/** Names listed per kind and server (catalog lists); the rest are counted in `omitted`. */
const MAX_NAMES = 500
/** Longest name kept: names are the backend's text. */
const MAX_NAME = 256

/** What the status page reads of the edge cache (cache/edge-cache.ts EdgeCache). */
interface CacheView {
  readonly stats: { readonly bytes: number; readonly entries: number }
  /** Whether the shared (Redis) tier is in use; undefined without `cache.redis`. */
  sharedTier?(): SharedTierReport | undefined
}

/** What the status page reads of a server's pins (catalog/pin-state.ts PinState). */
interface PinsView {
  readonly mode: { readonly onDrift: 'hide' | 'warn'; readonly newTools: 'hide' | 'allow' }
  driftedNames(): readonly { readonly kind: string; readonly name: string }[]
  /** Names lists showed that have no pin; the "new" column stays empty where PinState has none. */
  unpinnedNames?(): readonly { readonly kind: string; readonly name: string }[]
}

/** Everything one process reports from (server.ts wires it when `admin:` is configured). */
export interface LocalSources {
  readonly ref: RuntimeRef
  /** Runtimes replaced by a reload, still finishing what they carry. */
  readonly retiring: () => Iterable<GatewayRuntime>
  /** The config watcher's warnings (a refused reload). */
  readonly watcherWarnings: () => readonly string[]
  readonly cache: CacheView | undefined
  readonly health: HealthLog
  readonly denials: DenialLog
  readonly limited: LimitedCallers
  readonly config: ConfigRecord
  readonly startedAt: number
  readonly now?: () => number
}

/** What this process knows now, as one ProcessReport (report.ts). Reads state; no I/O. */
export function localReport(src: LocalSources): ProcessReport {
  const rt = src.ref.current
  const draining = src.ref.lifecycle.draining
  const now = (src.now ?? Date.now)()
  const servers = [...rt.servers.values()].map((s) => ({
    name: s.name,
    replicas: s.balancing.replicas.map((u) => replicaReport(s.name, u, draining, src.health, now)),
  }))
  const live = new Set<string>()
  for (const s of rt.servers.values())
    for (const u of s.balancing.replicas) live.add(replicaKey(s.name, u.url.href))
  src.health.keep(live)
  addRetiring(servers, live, src.retiring())
  const denials = src.denials.report()
  const watcherWarnings = src.watcherWarnings()
  src.config.observe(watcherWarnings)
  const { config, lastReload } = src.config.report()
  return {
    pid: process.pid,
    startedAt: src.startedAt,
    draining,
    config,
    lastReload,
    warnings: [...watcherWarnings, ...virtualProblems(rt), ...catalogWarnings(rt)],
    upstreamsOut: replicasOut(rt),
    servers,
    virtualServers: [...rt.virtualServers.values()].map((v): VirtualReport => ({
      name: v.name,
      members: v.memberNames,
      problems: v.state.problems(),
    })),
    cache: cacheReport(src.cache, rt),
    catalog: catalogReports(rt),
    denials: denials.recent,
    denialsByRule: denials.byRule,
    ruleHits: denials.hits,
    limited: src.limited.report(),
    configured: configuredOf(rt),
  }
}

/** One view per runtime (a reload or a policy swap makes a new one). */
const views = new WeakMap<GatewayRuntime, ConfiguredView>()

function configuredOf(rt: GatewayRuntime): ConfiguredView {
  let v = views.get(rt)
  if (v === undefined) views.set(rt, (v = configuredView(rt.config, rt.policy)))
  return v
}

/** Names a virtual server cannot expose (docs/virtual-servers.md §Names), as /readyz words them. */
function virtualProblems(rt: GatewayRuntime): string[] {
  const out: string[] = []
  for (const v of rt.virtualServers.values())
    for (const p of v.state.problems()) out.push(`virtualServers.${v.name}: ${p}`)
  return out
}

function replicaReport(
  server: string,
  u: Upstream,
  draining: boolean,
  health: HealthLog,
  now: number,
): ReplicaReport {
  const h = u.health
  const check = health.get(server, u.url.href)
  const state = h.down ? 'unhealthy' : h.ejected ? 'ejected' : draining ? 'draining' : 'healthy'
  const reason = h.down
    ? h.downReason
    : h.ejected
      ? h.ejectReason
      : draining
        ? 'the gateway is draining'
        : null
  return {
    id: u.id,
    // SECURITY: a configured URL may carry credentials (user:password@) or a key in its query.
    address: `${u.url.origin}${u.url.pathname}`,
    state,
    reason,
    until: h.ejected && h.ejectedUntil > now ? new Date(h.ejectedUntil).toISOString() : null,
    inFlight: u.inFlight,
    streams: u.streams,
    lastCheck:
      check === undefined
        ? null
        : {
            at: new Date(check.at).toISOString(),
            ok: !check.down,
            reason: check.down ? check.reason : null,
          },
    outInWorkers: u.available ? 0 : 1,
  }
}

/** Replicas a reload removed that their old runtime still drains (until its pools close). */
function addRetiring(
  servers: { name: string; replicas: ReplicaReport[] }[],
  live: ReadonlySet<string>,
  retiring: Iterable<GatewayRuntime>,
): void {
  const current = new Set(live)
  for (const old of retiring) {
    for (const s of old.servers.values()) {
      for (const u of s.balancing.replicas) {
        const key = replicaKey(s.name, u.url.href)
        if (current.has(key) || u.inFlight === 0) continue
        current.add(key)
        let entry = servers.find((x) => x.name === s.name)
        if (entry === undefined) servers.push((entry = { name: s.name, replicas: [] }))
        entry.replicas.push({
          id: `${u.id} (removed)`,
          address: `${u.url.origin}${u.url.pathname}`,
          state: 'draining',
          reason: 'removed by a reload; finishing its requests',
          until: null,
          inFlight: u.inFlight,
          streams: u.streams,
          lastCheck: null,
          outInWorkers: 0,
        })
      }
    }
  }
}

function cacheReport(cache: CacheView | undefined, rt: GatewayRuntime): CacheReport | null {
  if (cache === undefined) return null
  const { bytes, entries } = cache.stats
  const shared = cache.sharedTier?.()
  return {
    entries,
    bytes,
    maxBytes: rt.config.cache?.maxBytes ?? 0,
    sharedTier:
      shared === undefined
        ? null
        : { state: shared.state, ...(shared.reason !== undefined && { reason: shared.reason }) },
  }
}

function catalogReports(rt: GatewayRuntime): CatalogReport[] {
  const lock = lockOf(rt.config)
  const out: CatalogReport[] = []
  for (const s of rt.servers.values()) {
    if (s.catalog === undefined) continue
    const pins: PinsView | undefined = s.catalog.pins
    const pinned = lock?.servers.get(s.name)
    const drifted = pins?.driftedNames() ?? []
    const unpinned = pins?.unpinnedNames?.() ?? []
    let omitted = 0
    const sets = (kind: 'tools' | 'prompts' | 'skills'): NameSets => {
      const curated = curatedHidden(s.config[kind])
      const driftedNames = drifted.filter((d) => d.kind === kind).map((d) => d.name)
      const newNames = unpinned.filter((d) => d.kind === kind).map((d) => d.name)
      const hidden = new Set(curated)
      if (pins?.mode.onDrift === 'hide') for (const n of driftedNames) hidden.add(n)
      if (pins?.mode.newTools === 'hide') for (const n of newNames) hidden.add(n)
      const cap = (names: Iterable<string>): string[] => {
        const all = [...names]
        omitted += Math.max(0, all.length - MAX_NAMES)
        return all
          .slice(0, MAX_NAMES)
          .map((n) => (n.length <= MAX_NAME ? n : `${n.slice(0, MAX_NAME)}…`))
      }
      return {
        pinned: cap(pinned?.[kind]?.keys() ?? []),
        drifted: cap(driftedNames),
        new: cap(newNames),
        hidden: cap(hidden),
      }
    }
    const tools = sets('tools')
    const prompts = sets('prompts')
    const skills = sets('skills')
    out.push({
      server: s.name,
      onDrift: pins?.mode.onDrift ?? null,
      newTools: pins?.mode.newTools ?? null,
      tools,
      prompts,
      skills,
      // A server the lock names has its instructions pinned, as given or as none.
      instructions: drifted.some((d) => d.kind === 'instructions')
        ? 'drifted'
        : pinned !== undefined
          ? 'pinned'
          : 'unpinned',
      omitted,
    })
  }
  return out
}

function curatedHidden(items: Readonly<Record<string, { readonly hidden: boolean }>>): string[] {
  return Object.entries(items)
    .filter(([, c]) => c.hidden)
    .map(([name]) => name)
}
