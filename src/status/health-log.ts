import type { HealthShare } from '../upstream/health-share.js'

/** The last active health check of one replica. */
export interface HealthCheckRecord {
  /** ms since the epoch. */
  readonly at: number
  readonly down: boolean
  /** Why it is down (no addresses, upstream/health-check.ts); empty when up. */
  readonly reason: string
}

/**
 * The last active-check result per replica, as the health checker publishes it after every probe
 * (upstream/health-share.ts): the status page's "last health check". With several workers the
 * checker's results reach every worker through the primary and each keeps them here (cluster/
 * worker.ts); a single process records its own. Bounded by the replicas the config names (entries
 * of replicas a reload removed are dropped by `keep`).
 */
export class HealthLog {
  private readonly last = new Map<string, HealthCheckRecord>()

  record(server: string, url: string, down: boolean, reason: string, at = Date.now()): void {
    this.last.set(key(server, url), { at, down, reason })
  }

  get(server: string, url: string): HealthCheckRecord | undefined {
    return this.last.get(key(server, url))
  }

  /** Forgets replicas that are no longer configured (`live` holds `server url` pairs). */
  keep(live: ReadonlySet<string>): void {
    for (const k of this.last.keys()) if (!live.has(k)) this.last.delete(k)
  }
}

/** `server url`, the key HealthLog.keep takes. */
export function replicaKey(server: string, url: string): string {
  return key(server, url)
}

function key(server: string, url: string): string {
  return `${server} ${url}`
}

/**
 * The HealthShare of a gateway of one process with a status page: it runs its own checks, and
 * notes each result in `log` (a single process has no one to share them with).
 */
export function recordingHealthShare(log: HealthLog): HealthShare {
  return {
    checker: true,
    publish: (server, url, down, reason) => log.record(server, url, down, reason),
    known: () => undefined,
  }
}
