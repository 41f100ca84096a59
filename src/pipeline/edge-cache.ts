import type { Context, Next } from 'hono'
import type { Logger } from 'pino'
import type { CacheRequest, EdgeCache } from '../cache/edge-cache.js'
import type { CacheEntry } from '../cache/entry.js'
import { cacheRequestOf } from '../cache/request.js'
import { TIMED_OUT, type Leader } from '../cache/single-flight.js'
import type { Slot } from '../cache/store.js'
import type { GatewayEnv } from './env.js'
import { GatewayError, type ErrorCode } from '../errors.js'
import type { ResultHook } from '../mcp/result-transform.js'
import type { Stage } from './chain.js'
import { ALREADY_SENT, replaceResponse } from './node-response.js'

/**
 * Upstream failures a stale entry may stand in for (spec 2026-07-28 caching §ttlMs: MAY serve stale
 * on errors).
 */
const STALE_ON: ReadonlySet<ErrorCode> = new Set([
  'upstream_unavailable',
  'upstream_bad_response',
  'upstream_timeout',
  'deadline_exceeded',
  'no_upstream',
  'overloaded',
])

/**
 * Edge cache of cacheable results (docs/cache.md): the list methods, `resources/read` and
 * `server/discover` (mcp/methods.ts CACHEABLE_METHODS). A hit is answered here from pre-serialised
 * bytes with the requester's own id, then filtered by the caller's policy; a miss joins or leads
 * the single flight for its key and registers a hook that stores the upstream's answer when policy
 * allows. Without `cache:` every request goes upstream.
 */
export const edgeCache = (cache: EdgeCache, log: Logger): Stage =>
  function edgeCache(c, next) {
    const resolved = cacheRequestOf(
      c.get('server'),
      c.get('mcp'),
      c.get('body'),
      c.get('principal'),
      cache.rules.allowPrivate,
    )
    if (resolved === undefined) return next()
    const { req, rawId } = resolved
    const slot = cache.lookup(req)
    if (slot !== undefined) return serve(c, cache, slot, rawId, 'cache_hit')
    if (cache.isPass(req)) {
      cache.event('pass')
      return next()
    }
    return notHere(c, next, cache, req, rawId, log)
  }

/** Not in this process's store: the shared tier, then the single flight, then the backend. */
async function notHere(
  c: Context<GatewayEnv>,
  next: Next,
  cache: EdgeCache,
  req: CacheRequest,
  rawId: string,
  log: Logger,
): Promise<Response | void> {
  const shared = await cache.lookupShared(req)
  if (shared !== undefined) return serve(c, cache, shared, rawId, 'cache_hit')
  // Round two exists for private answers: once a key is known to answer privately, waiters
  // re-coalesce per authorization context instead of each going upstream (docs/cache.md
  // §Single flight).
  // A waiter waits no longer than its own request would for a response head: a leader held up
  // by its backend (or its client, past what the capture keeps) never holds the others.
  const deadline = performance.now() + c.get('server').balancing.headersTimeoutMs
  for (let round = 0; round < 2; round++) {
    const flight = cache.begin(req)
    if (flight.leader) return miss(c, next, cache, req, rawId, flight, log)
    const entry = await flight.wait(Math.max(0, deadline - performance.now()))
    if (entry === TIMED_OUT) {
      cache.event('wait_timeout')
      break
    }
    if (entry !== undefined && cache.usableFor(entry, req)) {
      cache.event('coalesced')
      return serve(c, cache, { entry, bytes: entry.result }, rawId, 'cache_hit')
    }
    const stored = cache.lookup(req)
    if (stored !== undefined) return serve(c, cache, stored, rawId, 'cache_hit')
    // The flight's answer was too large or had no usable hints: straight upstream, untouched.
    if (cache.isPass(req)) {
      cache.event('pass')
      return next()
    }
  }
  return miss(c, next, cache, req, rawId, undefined, log)
}

/** Forwards upstream with a capture hook; on an upstream failure, serves a stale entry if allowed. */
async function miss(
  c: Context<GatewayEnv>,
  next: Next,
  cache: EdgeCache,
  req: CacheRequest,
  rawId: string,
  flight: Leader<CacheEntry> | undefined,
  log: Logger,
): Promise<Response | void> {
  cache.event('miss')
  const generation = cache.generation(req.server)
  // Runs once the upstream body has ended: the observe tee (mcp/result-transform.ts) holds a JSON
  // answer of up to maxEntryBytes before its client gets a byte, so waiters are answered at the
  // backend's pace, whatever the leader's own client reads (docs/cache.md §Single flight).
  const capture = (message: Record<string, unknown>): undefined => {
    let entry: CacheEntry | undefined
    try {
      entry = cache.capture(req, message, generation)
    } catch (err) {
      log.warn(
        { err, server: c.get('server').name, method: req.method },
        'cache: could not store an answer',
      )
    }
    flight?.settle(entry)
    return undefined // the capture never changes what the client gets
  }
  // The tee gave up on the answer (too large to keep, or unreadable): from here it is relayed at
  // the pace of the leader's own socket, which must hold up nobody else. The waiters go their own
  // way at once, and the key passes for a while (docs/cache.md §Single flight).
  const unseen = (): void => {
    cache.cannotKeep(req)
    flight?.settle(undefined)
  }
  const hook: ResultHook = Object.assign(capture, { unseen })
  // A copy: the array may be shared with other stages (env.ts resultHooks).
  c.set('resultHooks', [...(c.get('resultHooks') ?? []), hook])
  try {
    await next()
  } finally {
    flight?.settle(undefined) // no answer captured (error, non-200, client gone): waiters go on
  }
  // hono hands an error thrown downstream to onError and resolves next(); it stays on c.error.
  const err = c.error
  if (!(err instanceof GatewayError) || !STALE_ON.has(err.code) || c.env.outgoing.headersSent)
    return
  const stale = await cache.stale(req)
  if (stale === undefined || c.env.outgoing.headersSent) return
  log.warn(
    {
      server: c.get('server').name,
      method: req.method,
      reason: err.code,
      ageMs: cache.now() - stale.entry.storedAt,
    },
    'cache: upstream failed; served a stale entry (stale-if-error)',
  )
  // The error onError rendered is replaced by the stale answer (node-response.ts).
  replaceResponse(c, serve(c, cache, stale, rawId, 'cache_stale'))
}

/** Writes a cache answer straight into Node's response (the proxy's fast path). */
function serve(
  c: Context<GatewayEnv>,
  cache: EdgeCache,
  slot: Slot,
  rawId: string,
  outcome: 'cache_hit' | 'cache_stale',
): Response {
  const hit = cache.render(slot, rawId, slot.entry.method, c.get('listFilter'))
  const out = c.env.outgoing
  out.writeHead(200, { 'content-type': 'application/json', 'content-length': hit.length })
  // Corked: head, stored bytes and tail leave in one writev, and the stored bytes are not copied.
  out.cork()
  out.write(hit.head)
  out.write(hit.body)
  out.end(hit.tail)
  c.set('outcome', outcome)
  cache.event(outcome === 'cache_hit' ? 'hit' : 'stale')
  return ALREADY_SENT
}
