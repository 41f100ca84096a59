import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfigText } from '../../src/runtime/load.js'
import { mcpPost } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'
import { startProvider, type TestProvider } from '../helpers/user-auth.js'

/**
 * RFC 7662 introspection of opaque access tokens (docs/auth.md §Opaque tokens) against
 * oidc-provider's introspection endpoint: the answer feeds the same audience rule and scopes as a
 * JWT's claims; every refusal is answered with its reason and reaches no backend.
 */

interface Setup {
  readonly gw: TestGateway
  readonly idp: TestProvider
  readonly app: SdkTestServer
  readonly advance: (ms: number) => void
  readonly introspections: () => number
}

async function setup(introspection: Record<string, unknown> = {}): Promise<Setup> {
  let now = Date.now()
  const idp = await closing(startProvider({ format: 'opaque', scopes: ['mcp:tools'] }))
  const app = await closing(startSdkServer())
  const client = await idp.register(['http://127.0.0.1/unused'])
  const config = (publicUrl: string) => ({
    listen: { host: '127.0.0.1', port: 0 },
    log: { level: 'info' },
    auth: {
      publicUrl,
      introspection: { ...client, issuer: idp.issuer, ...introspection },
    },
    servers: {
      app: { upstreams: [{ url: app.url }], requiredScopes: ['mcp:tools'] },
      other: { upstreams: [{ url: app.url }] },
    },
  })
  const gw = await startTestGateway(config('http://127.0.0.1'), {
    admin: false,
    start: { watch: false, auth: { now: () => now } },
  })
  await gw.reload(parseConfigText(stringify(config(gw.url)), { dir: process.cwd(), env: {} }))
  return {
    gw,
    idp,
    app,
    advance: (ms) => void (now += ms),
    introspections: () => idp.requests.filter((r) => r === 'POST /token/introspection').length,
  }
}

const list = (s: Setup, token: string, server = 'app') =>
  mcpPost(s.gw.mcpUrl(server), 'tools/list', {}, { auth: token, id: 5 })

/** A refusal: status, reason, the challenge, and nothing forwarded. */
function refused(s: Setup, res: Awaited<ReturnType<typeof list>>, status: number, reason: string) {
  expect(res.status).toBe(status)
  expect(res.headers['x-mcp-gateway-error']).toBe(reason)
  expect(res.response().error?.data).toMatchObject({ source: 'gateway', reason })
  expect(s.app.requests).toHaveLength(0)
}

describe('auth.introspection (RFC 7662)', () => {
  it('an active opaque token works; its answer is reused, never past exp', async () => {
    const s = await setup()
    const token = await s.idp.issueToken(s.gw.mcpUrl('app'), 'mcp:tools', 'alice')
    expect(token.split('.')).toHaveLength(1) // opaque, not a JWT
    // Concurrent requests with one token share one introspection (single flight).
    const first = await Promise.all([list(s, token), list(s, token), list(s, token)])
    expect(first.map((r) => r.status)).toEqual([200, 200, 200])
    expect((await list(s, token)).status).toBe(200)
    expect(s.introspections()).toBe(1)
    // After cacheMs (60 s) the AS is asked again.
    s.advance(61_000)
    expect((await list(s, token)).status).toBe(200)
    expect(s.introspections()).toBe(2)
    // Past the token's exp (300 s): refused, whatever the AS's own clock says.
    s.advance(300_000)
    const late = await list(s, token)
    expect(late.status).toBe(401)
    expect(late.headers['www-authenticate']).toContain('error="invalid_token"')
  })

  it('an inactive token is refused and not remembered', async () => {
    const s = await setup()
    const res = await list(s, 'not-a-token-the-as-issued')
    refused(s, res, 401, 'invalid_token')
    // Refused before the body is read (docs/design/check-order.md step 6): no id to echo.
    expect(res.response().id).toBeNull()
    expect(res.headers['www-authenticate']).toContain('error="invalid_token"')
    await list(s, 'not-a-token-the-as-issued')
    expect(s.introspections()).toBe(2)
  })

  it('a token for another server is refused (audience), one without the scope gets 403', async () => {
    const s = await setup()
    const other = await s.idp.issueToken(s.gw.mcpUrl('other'), 'mcp:tools', 'alice')
    refused(s, await list(s, other), 401, 'invalid_token')
    const narrow = await s.idp.issueToken(s.gw.mcpUrl('app'), 'openid', 'alice')
    const res = await list(s, narrow)
    expect(res.status).toBe(403)
    expect(res.headers['x-mcp-gateway-error']).toBe('insufficient_scope')
    expect(s.app.requests).toHaveLength(0)
  })

  it('an endpoint that is down fails closed: 503 with Retry-After, then the breaker', async () => {
    const s = await setup({ url: 'http://127.0.0.1:9/introspect', timeoutMs: 500 })
    const token = await s.idp.issueToken(s.gw.mcpUrl('app'), 'mcp:tools', 'alice')
    for (let i = 0; i < 4; i++) {
      const res = await list(s, token)
      refused(s, res, 503, 'auth_unavailable')
      expect(res.headers['retry-after']).toBeDefined()
    }
    // Nothing about the token in any log line.
    expect(JSON.stringify(s.gw.logs)).not.toContain(token)
  })
})
