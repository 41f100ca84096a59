import { Pool } from 'undici'
import type { UpstreamConfig } from '../config/schema.js'

/** Connection settings shared by every replica of one server. */
export interface UpstreamTimeouts {
  readonly connectMs: number
  readonly responseHeadersMs: number
  readonly streamIdleMs: number
}

/** One backend replica: its address, its keep-alive connection pool and its live counters. */
export class Upstream {
  readonly origin: string
  /** Path and query sent on the request line. */
  readonly path: string
  readonly weight: number
  readonly dispatcher: Pool
  /** Requests currently on this replica (least-request balancing, maxInFlight). */
  inFlight = 0

  constructor(
    /** Stable id for logs and metrics: `<server>#<index>`; never the URL (topology stays private). */
    readonly id: string,
    readonly url: URL,
    cfg: Pick<UpstreamConfig, 'weight'>,
    timeouts: UpstreamTimeouts,
    connections: number,
  ) {
    this.origin = url.origin
    this.path = `${url.pathname}${url.search}`
    this.weight = cfg.weight
    this.dispatcher = new Pool(url.origin, {
      connections,
      pipelining: 1,
      connect: { timeout: timeouts.connectMs },
      headersTimeout: timeouts.responseHeadersMs,
      bodyTimeout: timeouts.streamIdleMs,
      // Below Node's 5 s server keep-alive so we drop idle sockets before the backend does.
      keepAliveTimeout: 4000,
      keepAliveTimeoutThreshold: 1000,
    })
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
