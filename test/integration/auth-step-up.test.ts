import {
  Client,
  StreamableHTTPClientTransport,
  UnauthorizedError,
} from '@modelcontextprotocol/client'
import { decodeJwt } from 'jose'
import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { parseConfigText } from '../../src/runtime/load.js'
import {
  startAuthorizationServer,
  type TestAuthorizationServer,
} from '../helpers/authorization-server.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { ERAS, InMemoryOAuthClient } from '../helpers/oauth-client.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer, type TestServer } from '../helpers/sdk-servers.js'

/**
 * Step-up with the official client and a real authorization server (oidc-provider): a token good
 * for the server's everyday tools meets a tool that needs one more scope; the gateway's 403 makes
 * the client ask the AS for the union of what it has and what the challenge names, the user
 * consents, and the same call goes through (docs/auth.md §Scopes per tool).
 */

/** A gateway whose publicUrl is its own URL, trusting `as`, with `delete_*` needing docs:write. */
async function gatewayFor(as: TestAuthorizationServer, backend: TestServer): Promise<TestGateway> {
  const config = (publicUrl: string) => ({
    auth: { publicUrl, jwt: { issuer: as.issuer, jwksUrl: as.jwksUri } },
    servers: {
      weather: {
        upstreams: [{ url: backend.url }],
        requiredScopes: ['mcp:tools'],
        scopes: { tools: { 'delete_*': ['docs:write'] } },
      },
    },
  })
  // The port is known once listening: start, then reload with publicUrl = the gateway's own URL.
  const gw = await startTestGateway(config('http://127.0.0.1'), { admin: false })
  const text = stringify({ listen: { host: '127.0.0.1', port: 0 }, ...config(gw.url) })
  await gw.reload(parseConfigText(text, { dir: process.cwd(), env: {} }))
  return gw
}

describe('step-up with the official client and a real authorization server', () => {
  it.each(ERAS)(
    '$era: 403 insufficient_scope → the AS is asked for the union → the call goes through',
    async ({ options }) => {
      const as = await closing(startAuthorizationServer())
      const backend = await closing(startSdkServer())
      const gw = await gatewayFor(as, backend)
      const url = gw.mcpUrl('weather')
      const user = new InMemoryOAuthClient(as)
      // Signed in earlier, for the server's required scope only.
      const first = await as.issueToken(url, 'mcp:tools')
      user.saveTokens({ access_token: first, token_type: 'Bearer', scope: 'mcp:tools' })

      const client = new Client({ name: 'step-up', version: '1.0.0' }, options)
      const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: user })
      onTestFinished(() => client.close())
      await client.connect(transport)
      await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
      expect(backend.calls('tools/call')).toHaveLength(1)

      // The challenge makes the client re-authorize, which takes the user to the AS once more.
      await expect(
        client.callTool({ name: 'delete_station', arguments: { id: 'x' } }),
      ).rejects.toBeInstanceOf(UnauthorizedError)
      expect(backend.calls('tools/call')).toHaveLength(1)
      expect(user.authorizations).toHaveLength(1)
      const asked = user.authorizations[0]?.searchParams
      // What it had and what the challenge named (the client may add offline_access).
      expect(asked?.get('scope')?.split(' ')).toEqual(
        expect.arrayContaining(['docs:write', 'mcp:tools']),
      )
      expect(asked?.get('resource')).toBe(url)

      // Back from the browser: the new token carries both scopes, and the same call now works.
      await transport.finishAuth((user.callback as URL).searchParams)
      const stepped = user.tokens()?.access_token ?? ''
      expect(String(decodeJwt(stepped).scope).split(' ')).toEqual(
        expect.arrayContaining(['docs:write', 'mcp:tools']),
      )
      await client.callTool({ name: 'delete_station', arguments: { id: 'x' } })
      expect(backend.calls('tools/call')).toHaveLength(2)
    },
  )
})
