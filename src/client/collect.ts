import { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'

/**
 * A client socket stand-in for one member's answer inside a fan-out: the attempt loop and the
 * dispatch handler (upstream/attempts.ts, proxy-handler.ts) write into it exactly as they write to
 * a client, so a member is reached through its own path (replicas, retries, health, outlier
 * ejection) and nothing is re-implemented. It keeps no bytes: the result transform that reads the
 * answer (mcp/result-transform.ts) holds and bounds them. `abandon()` is what a client closing its
 * connection is: the member request is aborted at once (spec 2026-07-28 basic/transports/
 * streamable-http §Cancellation).
 */
export class CollectingResponse extends EventEmitter {
  destroyed = false
  writableFinished = false
  headersSent = false
  statusCode = 0

  /** The response headers, as the dispatch handler wrote them (a member's Mcp-Session-Id). */
  headers: Readonly<Record<string, unknown>> = {}

  writeHead(status: number, headers?: Readonly<Record<string, unknown>>): this {
    this.statusCode = status
    this.headers = headers ?? {}
    this.headersSent = true
    return this
  }

  flushHeaders(): void {}

  write(): boolean {
    return !this.destroyed
  }

  end(): this {
    this.writableFinished = true
    return this
  }

  destroy(): this {
    this.abandon()
    return this
  }

  /** Stops waiting for this member: the upstream request is aborted as on a client close. */
  abandon(): void {
    if (this.destroyed) return
    this.destroyed = true
    this.emit('close')
  }

  /** The ServerResponse surface the dispatch handler uses (writeHead, write, end, events). */
  asResponse(): ServerResponse {
    return this as unknown as ServerResponse
  }
}
