import { UnauthorizedError, type Client } from '@modelcontextprotocol/client'
import { decodeJwt, decodeProtectedHeader } from 'jose'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { gatewayTrusting, startAuthorizationServer } from '../helpers/authorization-server.js'
import { connectClient, connectLegacyClient, mcpPost } from '../helpers/clients.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { ERAS, InMemoryOAuthClient, clientFor, trace, type Hop } from '../helpers/oauth-client.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/**
 * What a user does: an MCP client meets the gateway without a token, discovers the authorization
 * server from the gateway's RFC 9728 metadata, registers, signs in (authorization code + PKCE,
 * RFC 8707 resource), and works; later its access token expires and is refreshed without a new
 * sign-in, and the AS rotates its signing key. The AS is oidc-provider, the backend an
 * official-SDK server, the client the official one (docs/auth.md, Sign in with your identity
 * provider).
 */

/** Both eras, with the key set named (`jwksUrl`) or found from the issuer's metadata. */
const JOURNEYS = ERAS.flatMap((era) =>
  (['jwksUrl', 'issuer'] as const).map((keys) => ({ ...era, keys })),
)

describe('sign in through the gateway with a real authorization server (official client)', () => {
  it.each(JOURNEYS)(
    '$era, keys from $keys: 401 → metadata → registration → code + PKCE → tools; refresh; key rotation',
    async ({ era, options, keys }) => {
      // One clock for the AS, the gateway and the client: tokens expire without waiting.
      vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true })
      onTestFinished(() => void vi.useRealTimers())
      const as = await closing(startAuthorizationServer({ accessTokenTtlSec: 60 }))
      const backend = await closing(startSdkServer())
      const gw = await gatewayTrusting(as, { weather: backend }, { keys })
      const url = gw.mcpUrl('weather')
      const prm = `${gw.url}/.well-known/oauth-protected-resource/mcp/weather`
      const user = new InMemoryOAuthClient(as)
      const hops: Hop[] = []

      // First contact: no token, so the gateway challenges and the client goes to sign in.
      const first = clientFor(url, user, hops, options)
      await expect(first.client.connect(first.transport)).rejects.toBeInstanceOf(UnauthorizedError)
      expect(hops[0]).toMatchObject({ method: 'POST', url, status: 401 })
      expect(hops[0]?.challenge).toBe(`Bearer scope="mcp:tools", resource_metadata="${prm}"`)
      expect(trace(hops.slice(1), gw, as)).toEqual([
        'GET GW/.well-known/oauth-protected-resource/mcp/weather 200',
        'GET AS/.well-known/oauth-authorization-server 200',
        'POST AS/reg 201',
      ])
      expect(backend.requests).toHaveLength(0)
      const authorization = user.authorizations[0]!
      expect(authorization.origin + authorization.pathname).toBe(`${as.issuer}/auth`)
      expect(authorization.searchParams.get('resource')).toBe(url)
      expect(authorization.searchParams.get('code_challenge_method')).toBe('S256')
      expect(authorization.searchParams.get('scope')?.split(' ')).toContain('mcp:tools')
      const callback = user.callback!
      expect(callback.origin + callback.pathname).toBe(user.redirectUrl)
      expect(callback.searchParams.get('iss')).toBe(as.issuer)

      // Back from the browser: the code (with the PKCE verifier) buys a token for this server.
      hops.length = 0
      await first.transport.finishAuth(callback.searchParams)
      expect(trace(hops, gw, as)).toEqual(['POST AS/token 200'])
      const issued = decodeJwt(user.accessToken())
      expect(issued).toMatchObject({ iss: as.issuer, aud: url, sub: 'alice' })
      expect(String(issued.scope).split(' ')).toContain('mcp:tools')
      expect(decodeProtectedHeader(user.accessToken()).kid).toBe(as.kid)

      const { client } = await connectedAgain(url, user, hops, options)
      const tools = await client.listTools()
      expect(tools.tools.map((t) => t.name)).toContain('get_forecast')
      const forecast = await callForecast(client)
      expect(textOf(forecast)).toContain('Paris')
      expect(backend.calls('tools/call')).toHaveLength(1)
      expect(backend.calls('tools/call')[0]?.header('mcp-protocol-version')).toBe(era)
      expect(as.signIns).toBe(1)
      expect(as.grants).toEqual(['authorization_code'])
      // The gateway found the keys from the issuer's metadata (RFC 8414), like the client did.
      const metadataReads = as.requests.filter((r) => r.endsWith('/oauth-authorization-server'))
      expect(metadataReads).toHaveLength(keys === 'issuer' ? 2 : 1)
      const keyReads = () => as.requests.filter((r) => r === 'GET /jwks').length
      expect(keyReads()).toBe(1)

      // The access token expires: one 401, a refresh (no new sign-in), the call goes through.
      vi.setSystemTime(Date.now() + 100_000)
      hops.length = 0
      expect(textOf(await callForecast(client))).toContain('Paris')
      expect(trace(hops, gw, as)).toEqual([
        'POST GW/mcp/weather 401',
        'POST AS/token 200',
        'POST GW/mcp/weather 200',
      ])
      expect(hops[0]?.challenge).toContain('error="invalid_token"')
      expect(as.grants).toEqual(['authorization_code', 'refresh_token'])
      expect(as.signIns).toBe(1)

      // The AS rotates its key (the old one withdrawn) well within the gateway's JWKS cooldown.
      const oldKid = as.kid
      await as.rotateSigningKey()
      expect(as.kid).not.toBe(oldKid)
      // The token in hand was checked with a key the gateway still holds: it keeps working.
      expect(textOf(await callForecast(client))).toContain('Paris')

      // It expires; the refreshed token is signed with the new key, which the gateway has never
      // seen. The user sees the call succeed: one 401 (the expired token), nothing more.
      vi.setSystemTime(Date.now() + 100_000)
      hops.length = 0
      expect(textOf(await callForecast(client))).toContain('Paris')
      expect(decodeProtectedHeader(user.accessToken()).kid).toBe(as.kid)
      expect(trace(hops, gw, as)).toEqual([
        'POST GW/mcp/weather 401',
        'POST AS/token 200',
        'POST GW/mcp/weather 200',
      ])
      expect(as.grants).toEqual(['authorization_code', 'refresh_token', 'refresh_token'])
      expect(keyReads()).toBe(2) // the new kid, fetched at first sight
      const published = (await (await fetch(as.jwksUri)).json()) as { keys: { kid: string }[] }
      expect(published.keys.map((k) => k.kid)).toEqual([as.kid]) // the old key is withdrawn
      expect(as.signIns).toBe(1)
      expect(backend.calls('tools/call')).toHaveLength(4)
      // None of the real tokens went further than the gateway.
      for (const req of backend.requests) expect(req.header('authorization')).toBeUndefined()
      expect(as.errors).toEqual([])
    },
  )
})

/** A new client session with the tokens `user` already holds (no sign-in). */
async function connectedAgain(
  url: string,
  user: InMemoryOAuthClient,
  hops: Hop[],
  options: (typeof ERAS)[number]['options'],
): Promise<{ client: Client }> {
  const next = clientFor(url, user, hops, options)
  await next.client.connect(next.transport)
  return { client: next.client }
}

function callForecast(client: Client): Promise<object> {
  return client.callTool({ name: 'get_forecast', arguments: { city: 'Paris' } })
}

describe('each server accepts only tokens the AS issued for it (RFC 8707)', () => {
  it.each(ERAS)(
    "$era: another server's token, or the gateway root's, is refused; the backend sees nothing",
    async ({ era }) => {
      const as = await closing(startAuthorizationServer())
      const [weather, other] = await Promise.all([
        closing(startSdkServer()),
        closing(startSdkServer()),
      ])
      const gw = await gatewayTrusting(as, { weather, other })
      const forOther = await as.issueToken(gw.mcpUrl('other'), 'mcp:tools')
      const forRoot = await as.issueToken(gw.url, 'mcp:tools')
      expect(decodeJwt(forOther).aud).toBe(gw.mcpUrl('other'))
      expect(decodeJwt(forRoot).aud).toBe(gw.url)
      const connect = (url: string, auth: string) =>
        era === '2025-11-25' ? connectLegacyClient(url, { auth }) : connectClient(url, { auth })

      for (const token of [forOther, forRoot]) {
        await expect(connect(gw.mcpUrl('weather'), token)).rejects.toThrow()
        const res = await mcpPost(
          gw.mcpUrl('weather'),
          'tools/call',
          { name: 'get_forecast', arguments: { city: 'Paris' } },
          { auth: token },
        )
        expect(res.status).toBe(401)
        expect(res.headers['x-mcp-gateway-error']).toBe('invalid_token')
        expect(res.headers['www-authenticate']).toContain('error="invalid_token"')
        expect(res.response()).toMatchObject({ id: null, error: { code: -31001 } })
      }
      expect(weather.requests).toHaveLength(0)
      // The same token is good where it belongs.
      const client = await connect(gw.mcpUrl('other'), forOther)
      const result = await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
      expect(textOf(result)).toContain('Oslo')
      await client.close()
      expect(weather.requests).toHaveLength(0)
    },
  )

  it('with auth.jwt.audience = the gateway root, servers take the root token, not their own', async () => {
    const as = await closing(startAuthorizationServer())
    const weather = await closing(startSdkServer())
    const gw = await gatewayTrusting(
      as,
      { weather },
      { jwt: (publicUrl) => ({ audience: publicUrl }) },
    )
    const forWeather = await as.issueToken(gw.mcpUrl('weather'), 'mcp:tools')
    const forRoot = await as.issueToken(gw.url, 'mcp:tools')
    const refused = await mcpPost(gw.mcpUrl('weather'), 'tools/list', {}, { auth: forWeather })
    expect(refused.status).toBe(401)
    expect(refused.headers['x-mcp-gateway-error']).toBe('invalid_token')
    expect(weather.requests).toHaveLength(0)
    const accepted = await mcpPost(gw.mcpUrl('weather'), 'tools/list', {}, { auth: forRoot })
    expect(accepted.status).toBe(200)
    expect(accepted.response().result?.['tools']).toBeDefined()
  })
})
