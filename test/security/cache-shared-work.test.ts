import { describe, expect, it } from 'vitest'
import { mcpHeaders, type RawResponse } from '../helpers/clients.js'
import { cacheEvents, cacheGateway, post, rawBody, type CacheGateway } from '../helpers/cache.js'
import { closing } from '../helpers/lifecycle.js'
import { httpHead, stalledRequest } from '../helpers/raw-socket.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'

/**
 * Shared work never waits for one client's socket (docs/security.md §The cache). A single-flight
 * leader whose client sends `tools/list` on a cold key and never reads the answer must not hold
 * the other callers of that list: a list the cache keeps is stored at the backend's pace, and one
 * too large to keep lets its waiters go as soon as that is known, not when the stalled client
 * has taken it all (which is never). The backend is the official SDK server with a list of
 * several MiB; the stalled client is a raw socket that is never read.
 */

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const PUBLIC_60S = { ttlMs: 60_000, cacheScope: 'public' } as const
const MiB = 1024 * 1024
const LIST_BYTES = 4 * MiB

/** Rejects with `what` when `promise` takes longer than `ms` (far below any deadline here). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms)
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

interface Setup {
  readonly backend: SdkTestServer
  readonly gw: CacheGateway
  /** Lets the first tools/list through to the SDK server. */
  readonly release: () => void
  /** A bearer token for each of four principals. */
  readonly tokens: readonly string[]
}

/**
 * The SDK server with a 4 MiB public tools/list (its first one held until `release`), behind a
 * gateway with `cache` that verifies tokens, its listen stream up (so no drop races the test).
 */
async function setup(
  cache: Record<string, unknown>,
  responseMode: 'json' | 'sse' = 'json',
): Promise<Setup> {
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  let lists = 0
  const backend = await closing(
    startSdkServer({
      cacheHints: { 'tools/list': PUBLIC_60S },
      descriptions: { get_forecast: 'x'.repeat(LIST_BYTES) },
      responseMode,
      hold: (req) => (req.rpcMethod === 'tools/list' && ++lists === 1 ? gate : undefined),
    }),
  )
  const key = await generateTestKey('ES256')
  const jwks = await closing(startJwks([key]))
  const gw = await cacheGateway(backend.url, cache, {
    auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
  })
  const aud = `${PUBLIC}/mcp/app`
  const tokens = await Promise.all(
    ['p0', 'p1', 'p2', 'p3'].map((sub) => mintToken(claimsFor(ISS, aud, { sub }), { key })),
  )
  await expect
    .poll(() => gw.cache?.invalidator.isConnected('app'), { message: 'the listen stream' })
    .toBe(true)
  return { backend, gw, release, tokens }
}

/** Sends tools/list with id `id` as `token`'s principal over a socket that is never read. */
function stalledLeader(gw: CacheGateway, token: string, id: string): void {
  const u = new URL(gw.app)
  const body = rawBody(id)
  const headers = Object.entries({
    ...mcpHeaders('tools/list'),
    host: u.host,
    authorization: `Bearer ${token}`,
    'content-length': String(Buffer.byteLength(body)),
  })
  stalledRequest(Number(u.port), httpHead('POST', u.pathname, headers) + body)
}

/** The JSON-RPC ids of the tools/list requests the SDK server received, in order. */
function idsSeen(backend: SdkTestServer): unknown[] {
  return backend.calls('tools/list').map((r) => (r.json() as { id?: unknown }).id)
}

const sorted = (ids: unknown[]): unknown[] => [...ids].sort((a, b) => Number(a) - Number(b))

/** Asserts a whole 4 MiB list answered to request `id`. */
function wholeList(res: RawResponse, id: number): void {
  expect(res.status).toBe(200)
  const message = res.response()
  expect(message.id).toBe(id)
  const tools = (message.result as { tools: { name: string; description?: string }[] }).tools
  expect(tools.find((t) => t.name === 'get_forecast')?.description).toHaveLength(LIST_BYTES)
}

/** Three other principals ask for the list while the stalled leader's request is at the backend. */
async function waitersOf(s: Setup): Promise<Promise<RawResponse>[]> {
  stalledLeader(s.gw, s.tokens[0] as string, '0')
  await expect
    .poll(() => s.backend.calls('tools/list').length, { message: 'the leader at the backend' })
    .toBe(1)
  const waiters = [1, 2, 3].map((id) =>
    post(s.gw.app, String(id), 'tools/list', {}, { authorization: `Bearer ${s.tokens[id]}` }),
  )
  await expect
    .poll(() => s.gw.cache?.cache.stats.waiters, { message: 'three waiters on the leader' })
    .toBe(3)
  s.release()
  return waiters
}

describe('shared work: a client that never reads holds up nobody else', () => {
  for (const mode of ['json', 'sse'] as const)
    it(`lets the waiters of a list too large to keep go at the backend pace (${mode}), each to its own answer`, async () => {
      // maxEntryBytes 1 MiB (the default): the 4 MiB answer is relayed, not kept.
      const s = await setup({}, mode)
      const answers = await within(Promise.all(await waitersOf(s)), 10_000, 'the waiters')
      answers.forEach((res, i) => wholeList(res, i + 1))
      // Nothing could be shared: each waiter's own request reached the backend, with its own id.
      // (the waiters are let go together: their requests arrive in any order)
      expect(idsSeen(s.backend)[0]).toBe(0)
      expect(sorted(idsSeen(s.backend))).toEqual([0, 1, 2, 3])
      expect(await cacheEvents(s.gw, 'wait_timeout')).toBe(0)
      expect(await cacheEvents(s.gw, 'coalesced')).toBe(0)
      expect(s.gw.cache?.cache.stats.waiters).toBe(0)
      // The key passes now: the next caller streams the backend's answer without a capture.
      const passes = await cacheEvents(s.gw, 'pass')
      wholeList(
        await post(s.gw.app, '4', 'tools/list', {}, { authorization: `Bearer ${s.tokens[1]}` }),
        4,
      )
      expect(sorted(idsSeen(s.backend))).toEqual([0, 1, 2, 3, 4])
      expect(await cacheEvents(s.gw, 'pass')).toBe(passes + 1)
    })

  it('stores a list it keeps at the backend pace and answers every waiter from it', async () => {
    const s = await setup({ maxEntryBytes: 8 * MiB })
    const answers = await within(Promise.all(await waitersOf(s)), 10_000, 'the waiters')
    answers.forEach((res, i) => wholeList(res, i + 1))
    // One backend request for four principals: the stalled leader's.
    expect(idsSeen(s.backend)).toEqual([0])
    expect(await cacheEvents(s.gw, 'coalesced')).toBe(3)
    expect(await cacheEvents(s.gw, 'wait_timeout')).toBe(0)
  })
})

describe('shared work: notifications before the answer do not hold the waiters either', () => {
  it('lets the waiters go when a stalled leader stops reading before the SSE answer came', async () => {
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    let lists = 0
    const backend = await closing(
      startSdkServer({
        cacheHints: { 'tools/list': PUBLIC_60S },
        responseMode: 'sse',
        // 4 MiB of log notifications on the answer's stream, then a small list the cache keeps
        listNotes: 64,
        hold: (req) => (req.rpcMethod === 'tools/list' && ++lists === 1 ? gate : undefined),
      }),
    )
    const key = await generateTestKey('ES256')
    const jwks = await closing(startJwks([key]))
    const gw = await cacheGateway(
      backend.url,
      {},
      {
        auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
      },
    )
    const aud = `${PUBLIC}/mcp/app`
    const tokens = await Promise.all(
      ['p0', 'p1', 'p2', 'p3'].map((sub) => mintToken(claimsFor(ISS, aud, { sub }), { key })),
    )
    await expect.poll(() => gw.cache?.invalidator.isConnected('app')).toBe(true)
    const answers = await within(
      Promise.all(await waitersOf({ backend, gw, release, tokens })),
      10_000,
      'the waiters',
    )
    for (const [i, res] of answers.entries()) {
      expect(res.status).toBe(200)
      expect(res.response().id, res.text.slice(-400)).toBe(i + 1)
      expect(res.response().error, res.text.slice(-400)).toBeUndefined()
      const tools = (res.response().result as { tools: { name: string }[] }).tools
      expect(tools.map((t) => t.name)).toContain('get_forecast')
    }
    expect(await cacheEvents(gw, 'wait_timeout')).toBe(0)
    expect(gw.cache?.cache.stats.waiters).toBe(0)
  })
})
