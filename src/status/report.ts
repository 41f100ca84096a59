/**
 * What one gateway process reports to its status page (docs/operations.md §Status page): plain
 * JSON, so that with `workers:` each worker's report crosses the IPC channel to the primary as is
 * and is merged there (merge.ts). Names from backends and clients are kept as text; the page
 * escapes them (html.ts), status.json carries them as JSON strings.
 */
import type { ConfiguredView } from './configured.js'
import type { DenialRecord } from './denials.js'
import type { LimitedRecord } from './limited.js'

export type ReplicaState = 'healthy' | 'ejected' | 'unhealthy' | 'draining'

export interface ReplicaReport {
  /** `<server>#<index>`, as logs and metrics name it. */
  readonly id: string
  /** Origin and path only: credentials and the query of a configured URL never appear. */
  readonly address: string
  readonly state: ReplicaState
  /** Why it is not healthy (no addresses); null when healthy. */
  readonly reason: string | null
  /** When an ejection ends (ISO time); null otherwise. */
  readonly until: string | null
  /** Requests on the replica now, streams included. */
  readonly inFlight: number
  /** Of those, long-lived streams. */
  readonly streams: number
  /** The last active health check; null without `healthCheck:` or before the first one. */
  readonly lastCheck: {
    readonly at: string
    readonly ok: boolean
    readonly reason: string | null
  } | null
  /** With `workers:`, how many workers have it out of rotation (passive ejection is per worker). */
  readonly outInWorkers: number
}

export interface ServerReport {
  readonly name: string
  readonly replicas: readonly ReplicaReport[]
}

export interface VirtualReport {
  readonly name: string
  readonly members: readonly string[]
  /** Names it cannot expose (collisions under `prefix: never`). */
  readonly problems: readonly string[]
}

/** Definitions of one kind, by name (bounded: local.ts MAX_NAMES each). */
export interface NameSets {
  /** In the lock. */
  readonly pinned: readonly string[]
  /** Listed with another digest than their pin. */
  readonly drifted: readonly string[]
  /** Listed, with no pin. */
  readonly new: readonly string[]
  /** Not shown to clients: hidden by curation, drifted under `onDrift: hide`, new under `newTools: hide`. */
  readonly hidden: readonly string[]
}

export interface CatalogReport {
  readonly server: string
  /** Undefined when the server is curated but not pinned. */
  readonly onDrift: 'hide' | 'warn' | null
  readonly newTools: 'hide' | 'allow' | null
  readonly tools: NameSets
  readonly prompts: NameSets
  /** Skills of the skills extension, by the URI of their SKILL.md. */
  readonly skills: NameSets
  /** The server's instructions against their pin. */
  readonly instructions: 'pinned' | 'drifted' | 'unpinned'
  /** Names left out of the lists above by their bound. */
  readonly omitted: number
}

/** The shared (Redis) cache tier: cache/shared.ts SharedTierStatus. */
export interface SharedTierReport {
  readonly state: string
  readonly reason?: string | undefined
}

export interface CacheReport {
  readonly entries: number
  readonly bytes: number
  readonly maxBytes: number
  /** Null without `cache.redis`. */
  readonly sharedTier: SharedTierReport | null
}

export interface ConfigReport {
  /** The config file, or null for a config given in code (tests). */
  readonly file: string | null
  /** 16 hex digits of SHA-256 over the loaded config and the policy set's id. */
  readonly digest: string
  readonly policyId: string | null
  readonly policyMode: 'enforce' | 'dry-run'
  /** ISO time the running config (or its policies) was loaded. */
  readonly loadedAt: string
}

export interface ReloadReport {
  readonly at: string
  readonly outcome: 'applied' | 'refused'
  /** What an applied reload changed. */
  readonly changed: 'config' | 'policies' | null
  /** Why a refused one was refused (bounded); empty when applied. */
  readonly problems: readonly string[]
  /**
   * When the files on disk were found to match the running config again after a refusal (the
   * edit was undone, so nothing reloaded); null while they still differ, and for an applied one.
   */
  readonly resolvedAt: string | null
}

/** A replica out of rotation, as /readyz (admin) lists it. */
export interface UpstreamOutReport {
  readonly server: string
  readonly upstream: string
  readonly state: 'down' | 'ejected'
  readonly reason: string
  readonly until?: string | undefined
}

export interface ProcessReport {
  readonly pid: number
  /** ms since the epoch. */
  readonly startedAt: number
  readonly draining: boolean
  readonly config: ConfigReport
  readonly lastReload: ReloadReport | null
  /** /readyz (admin) warnings: a refused reload, names a virtual server cannot expose, drift. */
  readonly warnings: readonly string[]
  readonly upstreamsOut: readonly UpstreamOutReport[]
  readonly servers: readonly ServerReport[]
  readonly virtualServers: readonly VirtualReport[]
  /** Null without `cache:`. */
  readonly cache: CacheReport | null
  readonly catalog: readonly CatalogReport[]
  /** Newest first. */
  readonly denials: readonly DenialRecord[]
  readonly denialsByRule: Readonly<Record<string, number>>
  /** Policy decisions per deciding rule since start (denials.ts DenialsReport.hits). */
  readonly ruleHits: Readonly<Record<string, number>>
  readonly limited: readonly LimitedRecord[]
  /** What the running config sets up (configured.ts). */
  readonly configured: ConfiguredView
}
