import type { IncomingMessage, ServerResponse } from 'node:http'
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response'
import type { Context } from 'hono'
import type { GatewayEnv } from './env.js'

/**
 * hono's escape hatches, in one module. hono composes the stages and routes, but the answers that
 * matter for speed (forwarded ones, cache hits) are written straight into Node's ServerResponse,
 * without a web Response (docs/design/hot-path.md). Stages that do so must tell hono that the
 * response is already written; how that works depends on hono's internals, so a hono upgrade is
 * checked against this file.
 */

/**
 * What a stage, or onError, returns once `c.env.outgoing` was written (or destroyed) by hand. The
 * listener below recognises it by identity and writes nothing more. One shared object: nothing may
 * set a header on it (no stage touches `c.res.headers`).
 */
export const ALREADY_SENT: Response = RESPONSE_ALREADY_SENT

/**
 * Replaces the response hono holds (an error onError already rendered) with `sent`, an answer a
 * stage wrote into Node's response itself (stale-if-error in the cache stage). Cleared first:
 * hono's `c.res` setter would otherwise build a new Response from `sent` and copy the error's
 * headers onto it, instead of keeping the already-sent marker as it is.
 */
export function replaceResponse(c: Context<GatewayEnv>, sent: Response): void {
  c.res = undefined
  c.res = sent
}

/** What hono's `fetch` is handed: the request as hono routes it, and Node's own objects. */
export type AppFetch = (
  req: Request,
  env: { incoming: IncomingMessage; outgoing: ServerResponse },
) => Response | Promise<Response>

/**
 * The request as hono reads it: a method and an absolute URL, which is all its router and our
 * stages use (stages read headers from Node's `rawHeaders`, the body from Node's stream). No web
 * Request, no Headers, no AbortController, no URL object per request (docs/design/hot-path.md).
 * `headers` is built only if something asks for it.
 */
class NodeRequest {
  private built: Headers | undefined
  constructor(
    readonly method: string,
    readonly url: string,
    private readonly incoming: IncomingMessage,
  ) {}

  get headers(): Headers {
    if (this.built === undefined) {
      const h = new Headers()
      const raw = this.incoming.rawHeaders
      for (let i = 0; i < raw.length; i += 2) h.append(raw[i] as string, raw[i + 1] as string)
      this.built = h
    }
    return this.built
  }
}

/** An origin-form target hono can route as is: no dot segments, nothing to normalise. */
const PLAIN_TARGET = /^\/[!#$&-;=?-[\]_a-z~]*$/
const DOT_SEGMENT = /\/\.\.?(?:[/?#]|$)/
/** hono's router reads the path after `scheme://host`; the host is never looked at. */
const ORIGIN = 'http://gateway'

/**
 * The absolute URL hono routes on, or undefined for a target that is not a path (RFC 9112 §3.2:
 * origin-form, or absolute-form). Dot segments are resolved (RFC 3986 §5.2.4), as a browser or
 * any URL parser would, so `/mcp/a/../b` is judged as `/mcp/b`, the name the backend will see.
 */
function routedUrl(target: string): string | undefined {
  if (target.charCodeAt(0) === 47 /* / */) {
    if (PLAIN_TARGET.test(target) && !DOT_SEGMENT.test(target)) return ORIGIN + target
    // SECURITY: a backslash before the query is a path separator to some parsers and not to
    // others; refused rather than guessed at.
    const backslash = target.indexOf('\\')
    const query = target.indexOf('?')
    if (backslash !== -1 && (query === -1 || backslash < query)) return undefined
    try {
      return new URL(ORIGIN + target).href
    } catch {
      return undefined
    }
  }
  if (target.startsWith('http://') || target.startsWith('https://')) {
    try {
      const url = new URL(target)
      return ORIGIN + url.pathname + url.search
    } catch {
      return undefined
    }
  }
  return undefined
}

/** How long, and how much, an unread request body is drained after an answer before closing. */
const DRAIN_MS = 500
const MAX_DRAIN_BYTES = 64 * 1024 * 1024

/**
 * The Node request listener: hands each request to hono and writes what it answers. The answers
 * that matter for speed were already written by their stage (ALREADY_SENT) and cost nothing here;
 * the others (errors, metadata, health) are small web Responses with a string or byte body.
 * `onRequest` sees every response first (the drain counter).
 */
export function nodeListener(
  app: AppFetch,
  onRequest: (res: ServerResponse) => void,
): (incoming: IncomingMessage, outgoing: ServerResponse) => void {
  return function listener(incoming, outgoing) {
    onRequest(outgoing)
    const url = routedUrl(incoming.url ?? '')
    if (url === undefined) {
      outgoing.writeHead(400, { 'content-length': '0', connection: 'close' }).end()
      return
    }
    const req = new NodeRequest(incoming.method ?? 'GET', url, incoming)
    let res: Response | Promise<Response>
    try {
      res = app(req as unknown as Request, { incoming, outgoing })
    } catch (err) {
      return failed(outgoing, err)
    }
    if (res === ALREADY_SENT) return afterAnswer(incoming, outgoing)
    if (res instanceof Promise) {
      res.then(
        (r) =>
          r === ALREADY_SENT ? afterAnswer(incoming, outgoing) : write(incoming, outgoing, r),
        (err: unknown) => failed(outgoing, err),
      )
    } else write(incoming, outgoing, res)
  }
}

/** Writes a (small, non-streaming) web Response hono produced. */
function write(incoming: IncomingMessage, outgoing: ServerResponse, res: Response): void {
  if (outgoing.headersSent || outgoing.destroyed) return
  const headers: Record<string, string | string[]> = {}
  res.headers.forEach((value, key) => {
    headers[key] = value
  })
  const cookies = res.headers.getSetCookie()
  if (cookies.length > 0) headers['set-cookie'] = cookies
  if (res.body === null) {
    outgoing.writeHead(res.status, headers).end()
    return afterAnswer(incoming, outgoing)
  }
  res.arrayBuffer().then(
    (body) => {
      if (outgoing.headersSent || outgoing.destroyed) return
      headers['content-length'] = String(body.byteLength)
      outgoing.writeHead(res.status, headers).end(Buffer.from(body))
      afterAnswer(incoming, outgoing)
    },
    (err: unknown) => failed(outgoing, err),
  )
}

/** A fault past hono's own error handler: a bare 500, or a cut connection once the head went out. */
function failed(outgoing: ServerResponse, err: unknown): void {
  process.emitWarning(err instanceof Error ? err : new Error(String(err)))
  if (outgoing.headersSent) {
    outgoing.destroy()
    return
  }
  outgoing.writeHead(500, { 'content-length': '0', connection: 'close' }).end()
}

/** What a held stream's request keeps of its header lines once the stages are done. */
const NO_HEADER_LINES: readonly string[] = Object.freeze([])

/**
 * The stages are done with the request. Two things may be left:
 * - an answer still being written: a long-lived stream (`subscriptions/listen`, a 2025-era GET)
 *   whose stages returned once its head was out. Nothing reads the request's header lines again
 *   (the stages kept what the stream's end needs), yet Node would keep them, and the header object
 *   built from them, for the stream's whole life: a caller's token among them, never forwarded
 *   (docs/design/hot-path.md §Stream memory);
 * - an answer given before the request body arrived in full (an early 401, a 415): the rest is
 *   drained, bounded in time and bytes, then the connection is closed, so a client cannot hold a
 *   connection open by trickling a body nobody reads.
 */
function afterAnswer(incoming: IncomingMessage, outgoing: ServerResponse): void {
  if (!outgoing.writableEnded) {
    incoming.rawHeaders = NO_HEADER_LINES as string[]
    incoming.headers = {}
  }
  // Whole body received (read or not: Node discards what is left itself) or no body at all.
  if (incoming.complete || incoming.destroyed) return
  const drain = (): void => {
    // Complete by now: a body read before Node's parser marked it so (pipeline/read-body.ts).
    if (incoming.complete || incoming.readableEnded || incoming.destroyed) return
    let bytes = 0
    const timer = setTimeout(close, DRAIN_MS)
    timer.unref()
    function close(): void {
      clearTimeout(timer)
      incoming.off('data', onData)
      incoming.off('end', done)
      incoming.socket?.destroySoon()
    }
    function onData(chunk: Buffer): void {
      bytes += chunk.length
      if (bytes > MAX_DRAIN_BYTES) close()
    }
    function done(): void {
      clearTimeout(timer)
      incoming.off('data', onData)
    }
    incoming.on('data', onData)
    incoming.once('end', done)
    incoming.resume()
  }
  if (outgoing.writableFinished) drain()
  else outgoing.once('finish', drain)
}
