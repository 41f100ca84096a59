import { describe, expect, it } from 'vitest'
import { mcpPost, rawRequest, type RawResponse } from '../helpers/clients.js'
import {
  browse,
  openConnectLink,
  userAuthWorld,
  type CookieJar,
  type UserAuthWorld,
} from '../helpers/user-auth.js'

/**
 * Per-user credentials (docs/auth.md §Per-user credentials, docs/security.md §Per-user tokens):
 * every refusal names itself (status, JSON-RPC code and reason, the request's id) and the service
 * behind the gateway sees nothing; the connect page lets nobody but the user connect their account.
 */

const URL_CAPABLE = {
  _meta: { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } },
}

/** A raw tools/call of `whoami` declaring URL elicitation (2026-07-28). */
function call(
  w: UserAuthWorld,
  token: string,
  id: number,
  extra: object = {},
): Promise<RawResponse> {
  return mcpPost(
    w.gw.mcpUrl('tracker'),
    'tools/call',
    { name: 'whoami', arguments: {}, ...URL_CAPABLE, ...extra },
    { auth: token, id },
  )
}

/** The connect prompt the gateway answers a call with: its link and requestState. */
async function prompt(w: UserAuthWorld, token: string): Promise<{ url: string; state: string }> {
  const res = await call(w, token, 7)
  expect(res.status).toBe(200)
  const result = res.response().result as {
    resultType: string
    inputRequests: Record<string, { method: string; params: { mode: string; url: string } }>
    requestState: string
  }
  expect(result.resultType).toBe('input_required')
  const request = result.inputRequests['connect:tracker']
  expect(request?.method).toBe('elicitation/create')
  expect(request?.params.mode).toBe('url')
  return { url: request?.params.url ?? '', state: result.requestState }
}

describe('userAuth: nothing reaches the service without the user’s token', () => {
  it('a call asks in band (input_required, URL mode) and forwards nothing', async () => {
    const w = await userAuthWorld()
    const { url, state } = await prompt(w, await w.token('alice'))
    expect(url.startsWith(`${w.gw.url}/connect/tracker?state=`)).toBe(true)
    // Nothing about the user in the URL: the state is sealed (spec client/elicitation §Safe URL Handling).
    expect(url).not.toContain('alice')
    expect(state.startsWith('mcp-edge.ua1.')).toBe(true)
    expect(w.tracker.requests).toHaveLength(0)
  })

  it('a client without URL elicitation gets -32021 naming the connect page', async () => {
    const w = await userAuthWorld()
    const res = await mcpPost(
      w.gw.mcpUrl('tracker'),
      'tools/call',
      { name: 'whoami', arguments: {} },
      { auth: await w.token('alice'), id: 'x-1' },
    )
    expect(res.status).toBe(400)
    expect(res.headers['x-mcp-gateway-error']).toBe('elicitation_not_supported')
    const error = res.response()
    expect(error.id).toBe('x-1')
    expect(error.error?.code).toBe(-32021)
    const data = error.error?.data as Record<string, unknown>
    expect(data).toMatchObject({
      source: 'gateway',
      reason: 'elicitation_not_supported',
      requiredCapabilities: { elicitation: { url: {} } },
      server: 'tracker',
    })
    expect(String(data['connectUrl'])).toMatch(/\/connect\/tracker\?state=/)
    expect(error.error?.message).toContain(String(data['connectUrl']))
    expect(w.tracker.requests).toHaveLength(0)
  })

  it('a list without the token is an error naming the connect page (no input_required on lists)', async () => {
    const w = await userAuthWorld()
    const res = await mcpPost(w.gw.mcpUrl('tracker'), 'tools/list', URL_CAPABLE, {
      auth: await w.token('alice'),
      id: 41,
    })
    expect(res.status).toBe(403)
    const error = res.response()
    expect(error.id).toBe(41)
    expect(error.error?.code).toBe(-31003)
    expect(error.error?.data).toMatchObject({ reason: 'user_connect_required', server: 'tracker' })
    expect(error.error?.message).toContain('/connect/tracker?state=')
    expect(w.tracker.requests).toHaveLength(0)
  })

  it('a list without the token is the public cached copy when the edge cache holds one', async () => {
    const w = await userAuthWorld({
      extra: { cache: {} },
      trackerCacheHints: { 'tools/list': { ttlMs: 60_000, cacheScope: 'public' } },
    })
    const alice = await w.token('alice')
    const { url } = await prompt(w, alice)
    expect((await openConnectLink(url, w.idp, w.as, 'alice')).status).toBe(200)
    const first = await mcpPost(w.gw.mcpUrl('tracker'), 'tools/list', URL_CAPABLE, { auth: alice })
    expect(first.status).toBe(200)
    const served = w.tracker.requests.length
    // bob has not connected: the public copy answers him, and the service sees nothing of him.
    const bob = await mcpPost(w.gw.mcpUrl('tracker'), 'tools/list', URL_CAPABLE, {
      auth: await w.token('bob'),
      id: 77,
    })
    expect(bob.status).toBe(200)
    expect(bob.response().id).toBe(77)
    const tools = (bob.response().result as { tools: { name: string }[] }).tools
    expect(tools.map((t) => t.name)).toContain('whoami')
    expect(w.tracker.requests).toHaveLength(served)
  })

  it('a retry with another user’s requestState is no answer to the prompt: asked again at once', async () => {
    const w = await userAuthWorld()
    const alice = await prompt(w, await w.token('alice'))
    const bob = await w.token('bob')
    const started = performance.now()
    const res = await call(w, bob, 8, {
      requestState: alice.state,
      inputResponses: { 'connect:tracker': { action: 'accept' } },
    })
    // Not held for connectWaitMs: the state is not bob's, so nobody is waited for.
    expect(performance.now() - started).toBeLessThan(5_000)
    expect(res.response().id).toBe(8)
    const result = res.response().result as { resultType: string; inputRequests: object }
    expect(result.resultType).toBe('input_required')
    expect(w.tracker.requests).toHaveLength(0)
  })
})

describe('userAuth: the connect page connects only the user the link was made for', () => {
  it('a link opened by another subject is refused, and nothing is stored', async () => {
    const w = await userAuthWorld()
    const token = await w.token('alice')
    const { url } = await prompt(w, token)
    const outcome = await openConnectLink(url, w.idp, w.as, 'mallory')
    expect(outcome.status).toBe(403)
    expect(outcome.page).toContain('another user')
    // Never sent on to the service's AS, and alice is still not connected.
    expect(w.as.requests.some((r) => r.startsWith('GET /auth'))).toBe(false)
    await prompt(w, token)
    expect(w.tracker.requests).toHaveLength(0)
  })

  it('a link works once, a changed one not at all, an old one no more', async () => {
    let now = Date.now()
    const w = await userAuthWorld({ now: () => now })
    const token = await w.token('alice')
    const first = await prompt(w, token)
    const tampered = first.url.replace(
      /state=(.)/,
      (_, c: string) => `state=${c === 'A' ? 'B' : 'A'}`,
    )
    expect((await openConnectLink(tampered, w.idp, w.as, 'alice')).status).toBe(400)
    const other = first.url.replace('/connect/tracker?', '/connect/nothere?')
    expect((await openConnectLink(other, w.idp, w.as, 'alice')).status).toBe(404)
    expect((await openConnectLink(first.url, w.idp, w.as, 'alice')).status).toBe(200)
    const again = await openConnectLink(first.url, w.idp, w.as, 'alice')
    expect(again.status).toBe(400)
    expect(again.page).toContain('already used')
    // A new link, opened after its ten minutes.
    const late = await prompt(w, await w.token('bob'))
    now += 10 * 60_000 + 1
    const expired = await openConnectLink(late.url, w.idp, w.as, 'bob')
    expect(expired.status).toBe(400)
    expect(expired.page).toContain('expired')
  })

  it('a flow started in one browser cannot be finished in another', async () => {
    const w = await userAuthWorld()
    const { url } = await prompt(w, await w.token('alice'))
    // The victim's browser: no cookie of the flow. The attacker started it and hands over the
    // sign-in's redirect back to the gateway.
    const jar = new Map<string, Map<string, string>>()
    const start = await fetch(url, { redirect: 'manual' })
    const toIdp = start.headers.get('location') ?? ''
    const back = await w.idp.signIn(toIdp, 'alice', jar)
    const res = await rawRequest('GET', back.href)
    expect(res.status).toBe(403)
    expect(res.text).toContain('browser that started it')
    expect(w.as.requests.some((r) => r.startsWith('GET /auth'))).toBe(false)
  })

  it('the service callback must come from the AS it was sent to (RFC 9207 iss)', async () => {
    const w = await userAuthWorld()
    const token = await w.token('alice')
    const { url } = await prompt(w, token)
    const jar: CookieJar = new Map()
    const start = await browse(new URL(url), jar)
    const back = await w.idp.signIn(start.headers.get('location') ?? '', 'alice', jar)
    const toAs = await browse(back, jar)
    expect(toAs.status).toBe(302)
    const authorize = new URL(toAs.headers.get('location') ?? '')
    // PKCE S256, the resource and the scopes go to the service's AS (RFC 7636, RFC 8707).
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256')
    expect(authorize.searchParams.get('resource')).toBe(w.tracker.url)
    expect(authorize.searchParams.get('scope')).toBe('issues:read')
    const callback = await w.as.signIn(authorize, 'alice', jar)
    expect(callback.searchParams.get('iss')).toBe(w.as.issuer)
    callback.searchParams.set('iss', 'https://evil.example')
    const res = await browse(callback, jar)
    expect(res.status).toBe(400)
    await prompt(w, token) // still not connected
    expect(w.tracker.requests).toHaveLength(0)
  })

  it('pages carry nothing secret and no referrer, and are never cached or framed', async () => {
    const w = await userAuthWorld()
    const { url } = await prompt(w, await w.token('alice'))
    const start = await fetch(url, { redirect: 'manual' })
    expect(start.status).toBe(302)
    expect(start.headers.get('referrer-policy')).toBe('no-referrer')
    expect(start.headers.get('cache-control')).toBe('no-store')
    const cookie = start.headers.get('set-cookie') ?? ''
    expect(cookie).toMatch(/HttpOnly/)
    expect(cookie).toMatch(/SameSite=Lax/)
    const outcome = await openConnectLink(url.replace(/state=.*/, 'state=x'), w.idp, w.as, 'alice')
    expect(outcome.status).toBe(400)
    expect(outcome.page).not.toContain('state=')
  })
})

describe('userAuth: nothing about a user’s token leaves the gateway', () => {
  it('no token value in logs, audit lines, /readyz, metrics, the status page or its user view', async () => {
    let now = Date.now()
    const w = await userAuthWorld({ admin: true, now: () => now })
    const token = await w.token('alice')
    const { url } = await prompt(w, token)
    const connected = await openConnectLink(url, w.idp, w.as, 'alice')
    expect(connected.status).toBe(200)
    expect((await call(w, token, 9)).response().result).toMatchObject({
      content: [{ type: 'text', text: 'user:alice' }],
    })
    now += 250_000 // refreshed before it expires
    expect((await call(w, token, 10)).status).toBe(200)
    w.tracker.refuseNext = 1 // refused once: refreshed again, sent again
    expect((await call(w, token, 11)).status).toBe(200)
    w.tracker.refuseNext = 2 // refused after the refresh too: dropped
    expect((await call(w, token, 12)).status).toBe(502)

    const admin = `http://127.0.0.1:${w.gw.adminPort}`
    const read = async (u: string) => (await fetch(u)).text()
    const view = await read(`${admin}/user-tokens.json`)
    const seen = [
      JSON.stringify(w.gw.logs),
      connected.page,
      await read(`${w.gw.url}/readyz`),
      await read(`${admin}/readyz`),
      await read(`${admin}/metrics`),
      await read(`${admin}/`),
      await read(`${admin}/status.json`),
      await read(`${admin}/user-tokens`),
      view,
    ].join('\n')
    // Every access, refresh and ID token the service's AS and the IdP's sign-in issued.
    const secrets = [...w.as.issued, ...w.idp.issued]
    expect(secrets.length).toBeGreaterThan(4)
    for (const secret of secrets) expect(seen).not.toContain(secret)
    const actions = w.gw.logs.filter((l) => l['decision'] === 'user_token').map((l) => l['action'])
    expect(actions).toEqual(['connect', 'refresh', 'refresh', 'refresh', 'drop'])
  })
})
