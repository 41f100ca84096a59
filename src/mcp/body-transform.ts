/**
 * The contract between the upstream dispatch and the code that looks at answers (list filters,
 * cache capture, task-id seals). Protocol code implements it; `src/upstream` drives it. It imports
 * nothing, so neither side depends on the other for it (the way undici keeps `types/` apart from
 * its `lib/`).
 */

/** Rewrites or observes a response body on its way to the client. */
export interface BodyTransform {
  /**
   * true (SSE): the head goes out at once and output is written as it comes. false: the head
   * waits for the first output of push() (then chunked) or for end() (then with Content-Length),
   * so end() may still refuse the answer with a 502.
   */
  readonly streaming: boolean
  /** The output is the input, byte for byte: the backend's Content-Length still holds. */
  readonly exact?: boolean
  /** SSE: whether the final response (or the gateway's error in its place) has gone out. */
  readonly answered?: boolean
  /**
   * The client reads slower than the backend writes, while hooks that others wait on (a cache's
   * single flight: ResultHook.unseen) have not seen the final response: they are let go now,
   * since reading the backend at this client's pace would hold them.
   */
  stalled?(): void
  push(chunk: Buffer): Buffer | undefined
  /** Final bytes; may throw GatewayError when the body turned out unusable (before any output). */
  end(): Buffer | undefined
}

/** Response headers as undici reports them (lower-case names) and Node writes them. */
export type HeaderMap = Record<string, string | string[] | undefined>

/**
 * What a response body is, by its Content-Type (type and subtype case-insensitive, parameters
 * allowed): the one reading of it, for the dispatch and the answer readers alike.
 */
export function bodyKind(
  contentType: string | string[] | undefined,
): 'json' | 'sse' | 'none' | 'other' {
  if (contentType === undefined) return 'none'
  // Repeated Content-Type headers: no single answer to what the body is.
  if (typeof contentType !== 'string') return 'other'
  if (contentType === 'application/json') return 'json'
  if (contentType === 'text/event-stream') return 'sse'
  const semi = contentType.indexOf(';')
  const type = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase()
  return type === 'application/json' ? 'json' : type === 'text/event-stream' ? 'sse' : 'other'
}
