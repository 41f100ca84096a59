import type { ServerResponse } from 'node:http'
export { UpstreamFailure } from './failure.js'
import type { StreamStop } from './lifecycle.js'
import { ProxyHandler } from './proxy-handler.js'
import type { Upstream } from './upstream.js'

/** Rewrites a response body on its way to the client (list filtering, cache capture). */
export interface BodyTransform {
  /** true for SSE: headers go out at once and output is written as it comes. */
  readonly streaming: boolean
  push(chunk: Buffer): Buffer | undefined
  /** Final bytes; may throw GatewayError when the body turned out unusable (buffered mode only). */
  end(): Buffer | undefined
}

/** Response headers as undici reports them and Node writes them. */
export type HeaderMap = Record<string, string | string[] | undefined>

/** One upstream attempt. */
export interface ForwardRequest {
  readonly upstream: Upstream
  readonly method: 'POST' | 'GET' | 'DELETE'
  readonly headers: readonly string[]
  readonly body: Buffer | null
  readonly headersTimeoutMs: number
  readonly bodyTimeoutMs: number
  /** Chooses a transform from the response head; undefined streams the body untouched. */
  readonly transform?:
    ((status: number, headers: HeaderMap) => BodyTransform | undefined) | undefined
  /** Last look at the response headers before they are written (e.g. session id rewriting). */
  readonly onHeaders?: ((status: number, headers: HeaderMap) => void) | undefined
  /**
   * Hold a 5xx answer (up to 64 KiB) before writing anything: a JSON-RPC body is relayed as is,
   * anything else rejects with UpstreamFailure(status) so the caller can retry it or answer 502
   * (reliability B-06: a backend's well-formed JSON-RPC error is never replaced).
   */
  readonly inspectServerErrors?: boolean | undefined
  /** For long-lived streams: ends the response at the next event boundary on drain. */
  readonly stop?: StreamStop | undefined
}

/** How an attempt that reached the client ended. */
export type ForwardResult =
  | { readonly kind: 'done'; readonly status: number; readonly bytes: number }
  | { readonly kind: 'client_closed'; readonly status: number | undefined; readonly bytes: number }
  | {
      readonly kind: 'broken'
      readonly status: number
      readonly bytes: number
      readonly cause: Error
    }
  /** A stream ended cleanly after its last complete event because the gateway is draining. */
  | { readonly kind: 'drained'; readonly status: number; readonly bytes: number }

/**
 * Sends one request to `req.upstream` and streams the answer into `res` without buffering (SSE is
 * written event by event as it arrives; spec streamable-http §Sending Messages). Resolves once the
 * response is over; rejects with UpstreamFailure only when nothing was written to the client yet.
 */
export function forward(res: ServerResponse, req: ForwardRequest): Promise<ForwardResult> {
  return new Promise((resolve, reject) => {
    const handler = new ProxyHandler(res, req, resolve, reject)
    req.upstream.inFlight++
    req.upstream.dispatcher.dispatch(
      {
        origin: req.upstream.origin,
        path: req.upstream.path,
        method: req.method,
        headers: req.headers as string[],
        body: req.body,
        headersTimeout: req.headersTimeoutMs,
        bodyTimeout: req.bodyTimeoutMs,
      },
      handler,
    )
  })
}
