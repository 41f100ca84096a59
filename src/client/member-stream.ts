import { leaseStream, type UpstreamPool } from '../upstream/pool.js'
import type { Upstream } from '../upstream/upstream.js'
import type { ListenFilter, UpstreamEndpoint } from './discover.js'
import type { Invalidation } from '../mcp/changes.js'

/**
 * One member's notification stream: a 2026-07-28 `subscriptions/listen` (client/listen-stream.ts)
 * or a 2025-era standalone GET stream (client/legacy-get-stream.ts).
 */
export interface MemberStream {
  /** Resolves with what the member honours once its stream is open; rejects when it failed. */
  readonly acked: Promise<ListenFilter>
  /** Resolves when the stream is over (an Error for why; {@link NoStream}: never re-open). */
  readonly ended: Promise<Error | undefined>
  close(): void
}

/** A member said it offers no stream at all (a 405 to its GET): it is not asked again. */
export class NoStream extends Error {
  override readonly name = 'NoStream'
}

/** One replica (and, for a 2025-only member, its session) held for one stream attempt. */
export interface MemberLease {
  open(filter: ListenFilter, id: string, onChange: (what: Invalidation) => void): MemberStream
  release(): void
}

/** What the gateway needs of a server to open a stream of its own to it. */
export interface StreamServer {
  /** The server's configured headers (never a client's token). */
  readonly upstreamHeaders: readonly string[]
  readonly balancing: { readonly pool: UpstreamPool }
  readonly config: {
    readonly timeouts: { readonly responseHeadersMs: number; readonly streamIdleMs: number }
  }
}

/**
 * Where the gateway itself reaches `up`, one replica of `server`: its URL and connection pool,
 * `headers` (the server's configured ones unless a member request's are given: they carry its
 * exchanged token) and the server's timeouts, a stream's idle bound as its body timeout.
 */
export function streamEndpoint(
  server: StreamServer,
  up: Upstream,
  headers: readonly string[] = server.upstreamHeaders,
): UpstreamEndpoint {
  return {
    url: up.url.href,
    headers,
    dispatcher: up.dispatcher,
    headersTimeoutMs: server.config.timeouts.responseHeadersMs,
    bodyTimeoutMs: server.config.timeouts.streamIdleMs,
  }
}

/** One replica of a server held for one stream the gateway opens itself. */
export interface ReplicaLease {
  readonly up: Upstream
  /** Gives the replica's stream slot back, once. */
  readonly release: () => void
}

/**
 * A replica for one long-lived stream of the gateway's own (a member's listen or GET stream, a
 * held session's stream while a call reads its progress): `pinned` (the replica that holds a
 * 2025-era session) or the pool's pick among available replicas with room for a stream, counted
 * against its `maxStreams` through upstream/pool.ts `leaseStream` as the attempt loop counts a
 * client's stream, so balancing, capacity and the status page see it. Throws
 * `streams_at_capacity` / `no_upstream` as a direct listen would.
 */
export function leaseReplica(server: StreamServer, pinned?: Upstream): ReplicaLease {
  const up = pinned ?? server.balancing.pool.select(undefined, undefined, true)
  return { up, release: leaseStream(up) }
}
