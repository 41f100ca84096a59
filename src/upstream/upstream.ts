import { Pool } from 'undici'
import type { ReplicaHealth } from './health.js'

/** Connection settings shared by every replica of one server. */
export interface UpstreamTimeouts {
  readonly connectMs: number
  readonly responseHeadersMs: number
  readonly streamIdleMs: number
}

/**
 * One backend replica: its address, its keep-alive connection pool, its live in-flight count and
 * its health. A replica named by several pools of one server (main pool, routes) is one object,
 * so its load and health are seen by all of them.
 */
export class Upstream {
  readonly origin: string
  /** Path and query sent on the request line. */
  readonly path: string
  readonly dispatcher: Pool
  /** Requests currently on this replica, streams included (counted by forward()). */
  inFlight = 0
  /**
   * Of those, long-lived streams (subscriptions/listen, 2025-era GET; counted by the attempt
   * loop). They have their own budget, maxStreams: `inFlight - streams` is what maxInFlight caps.
   */
  streams = 0

  constructor(
    /** Stable id for logs and metrics: `<server>#<index>`; never the URL (topology stays private). */
    readonly id: string,
    readonly url: URL,
    timeouts: UpstreamTimeouts,
    /** Per-replica cap on ordinary requests (maxInFlight). */
    readonly maxInFlight: number,
    /** Per-replica cap on long-lived streams (maxStreams). */
    readonly maxStreams: number,
    readonly health: ReplicaHealth,
  ) {
    this.origin = url.origin
    this.path = `${url.pathname}${url.search}`
    this.dispatcher = new Pool(url.origin, {
      // One connection per request or stream the two caps allow: there is no queue in undici.
      connections: maxInFlight + maxStreams,
      pipelining: 1,
      connect: { timeout: timeouts.connectMs },
      headersTimeout: timeouts.responseHeadersMs,
      bodyTimeout: timeouts.streamIdleMs,
      // Below Node's 5 s server keep-alive so we drop idle sockets before the backend does.
      keepAliveTimeout: 4000,
      keepAliveTimeoutThreshold: 1000,
    })
  }

  /** Takes new requests: neither health-checked down nor ejected. */
  get available(): boolean {
    return !this.health.down && !this.health.ejected
  }

  /** Closes idle connections and waits for in-flight ones. */
  close(): Promise<void> {
    return this.dispatcher.close()
  }

  /** Aborts every connection at once. */
  destroy(): Promise<void> {
    return this.dispatcher.destroy()
  }
}
