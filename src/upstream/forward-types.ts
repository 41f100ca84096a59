/**
 * The contract between the upstream dispatch and the code that looks at answers (list filters,
 * cache capture). It imports nothing, so `src/mcp` can implement a transform without depending on
 * `src/upstream` (the way undici keeps `types/dispatcher.d.ts` apart from its `lib/`).
 */

/** Rewrites or observes a response body on its way to the client. */
export interface BodyTransform {
  /**
   * true (SSE): the head goes out at once and output is written as it comes. false: the head
   * waits for the first output of push() (then chunked) or for end() (then with Content-Length),
   * so end() may still refuse the answer with a 502.
   */
  readonly streaming: boolean
  push(chunk: Buffer): Buffer | undefined
  /** Final bytes; may throw GatewayError when the body turned out unusable (before any output). */
  end(): Buffer | undefined
}

/** Response headers as undici reports them (lower-case names) and Node writes them. */
export type HeaderMap = Record<string, string | string[] | undefined>

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
  /** A stream that ended cleanly after its last complete event because the gateway is draining. */
  | { readonly kind: 'drained'; readonly status: number; readonly bytes: number }

/**
 * A long-lived stream whose head is written, when the caller asked to hear of its end separately
 * (ForwardRequest.onStreamEnd): the attempt is over, whatever comes next is the stream itself.
 */
export interface StreamHead {
  readonly kind: 'streaming'
  readonly status: number
}
