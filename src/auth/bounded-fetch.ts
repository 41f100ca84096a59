import { request } from 'undici'

/** One bounded request to an identity-provider endpoint (JWKS, token endpoint). */
export interface BoundedRequest {
  readonly method: 'GET' | 'POST'
  readonly headers: Readonly<Record<string, string>>
  readonly body?: string
  /** The whole exchange (connect, headers, body) must finish within this many milliseconds. */
  readonly timeoutMs: number
  /** Most body bytes read; a larger answer is abandoned, not buffered. */
  readonly maxBytes: number
  /**
   * Statuses besides 200 whose body is read (bounded alike) and returned: an OAuth error answer
   * (RFC 6749 §5.2, a 400 with `error`), which the caller must tell apart from an outage.
   */
  readonly accept?: ReadonlySet<number>
}

/** A 200 answer (or one of `accept`): its body as text and the response headers (lower-case names). */
export interface BoundedAnswer {
  readonly status: number
  readonly text: string
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
}

/** Why a bounded fetch gave up; `message` is short fixed text. */
export class BoundedFetchFailure extends Error {
  override readonly name = 'BoundedFetchFailure'
}

/**
 * Fetches `url` and returns the body of a 200 answer as text, with its headers. Everything else fails: a network
 * error, the deadline, a redirect (never followed: a 3xx could point the gateway, and for the
 * token endpoint the caller's token and the client secret, anywhere), any other status, a declared
 * or actual body larger than `maxBytes`. A body is read chunk by chunk and the connection dropped
 * the moment the cap is passed, so a hostile or broken endpoint costs at most `maxBytes` of memory
 * (docs/auth.md, Key fetching and Token exchange: an unbounded read is a memory DoS).
 */
export async function fetchBounded(url: string, req: BoundedRequest): Promise<BoundedAnswer> {
  // SECURITY: one deadline for the whole exchange, body included: a slow-drip answer cannot
  // hold the fetch (and every request coalesced onto it) past timeoutMs.
  const signal = AbortSignal.timeout(req.timeoutMs)
  let res: Awaited<ReturnType<typeof request>>
  try {
    // undici's request() follows no redirects unless an interceptor is added; none is.
    res = await request(url, {
      method: req.method,
      headers: { 'user-agent': 'mcp-edge', ...req.headers },
      ...(req.body !== undefined && { body: req.body }),
      signal,
      headersTimeout: req.timeoutMs,
      bodyTimeout: req.timeoutMs,
    })
  } catch (err) {
    throw new BoundedFetchFailure(signal.aborted ? 'timed out' : 'unreachable', { cause: err })
  }
  const body = res.body
  // Destroying an undici body emits an abort error; ours are deliberate, so nobody must hear it
  // as uncaught. Read errors still reach the loop below through its iterator.
  body.on('error', ignore)
  if (res.statusCode !== 200 && req.accept?.has(res.statusCode) !== true) {
    body.destroy()
    // SECURITY: a 3xx is a failure; its Location is never requested.
    const redirect = res.statusCode >= 300 && res.statusCode < 400
    throw new BoundedFetchFailure(`answered ${res.statusCode}${redirect ? ', not followed' : ''}`)
  }
  const declared = Number(res.headers['content-length'] ?? 0)
  // SECURITY: refuse a declared oversize body before reading a byte of it.
  if (!(declared <= req.maxBytes)) {
    body.destroy()
    throw new BoundedFetchFailure('answer too large')
  }
  const chunks: Buffer[] = []
  let size = 0
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      size += chunk.length
      // SECURITY: the cap holds while reading; leaving the loop destroys the body and socket.
      if (size > req.maxBytes) throw new BoundedFetchFailure('answer too large')
      chunks.push(chunk)
    }
  } catch (err) {
    body.destroy()
    if (err instanceof BoundedFetchFailure) throw err
    throw new BoundedFetchFailure(signal.aborted ? 'timed out' : 'body read failed', { cause: err })
  }
  const text = Buffer.concat(chunks, size).toString('utf8')
  return { status: res.statusCode, text, headers: res.headers }
}

function ignore(): void {}
