import { UnauthorizedError } from '@modelcontextprotocol/client'
import { decodeJwt } from 'jose'
import { describe, expect, it } from 'vitest'
import { gatewayTrusting, startAuthorizationServer } from '../helpers/authorization-server.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { ERAS, InMemoryOAuthClient, clientFor, trace, type Hop } from '../helpers/oauth-client.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/**
 * The user grants less than the server requires (unticks a scope at consent). The gateway answers
 * 403 `insufficient_scope` naming every scope the server needs (spec 2026-07-28 §8); the official
 * client asks the user again for the union of scopes (step-up), and the call then goes through.
 * Until then the backend sees nothing.
 */
describe('step-up: a token without a required scope, then one with it', () => {
  it.each(ERAS)(
    '$era: 403 insufficient_scope → second sign-in → tools',
    async ({ era, options }) => {
      const as = await closing(startAuthorizationServer())
      const backend = await closing(startSdkServer())
      const required = ['mcp:tools', 'docs:write']
      const gw = await gatewayTrusting(as, { docs: backend }, { requiredScopes: required })
      const url = gw.mcpUrl('docs')
      const prm = `${gw.url}/.well-known/oauth-protected-resource/mcp/docs`
      const user = new InMemoryOAuthClient(as)
      const hops: Hop[] = []

      // First sign-in: the client asks for both scopes, the user grants only mcp:tools.
      as.declined.add('docs:write')
      const first = clientFor(url, user, hops, options)
      await expect(first.client.connect(first.transport)).rejects.toBeInstanceOf(UnauthorizedError)
      expect(user.authorizations[0]?.searchParams.get('scope')?.split(' ')).toEqual(
        expect.arrayContaining(required),
      )
      await first.transport.finishAuth(user.callback!.searchParams)
      expect(String(decodeJwt(user.accessToken()).scope).split(' ')).not.toContain('docs:write')

      // The gateway refuses that token with 403; the client sends the user back to the AS.
      as.declined.clear()
      hops.length = 0
      const second = clientFor(url, user, hops, options)
      await expect(second.client.connect(second.transport)).rejects.toBeInstanceOf(
        UnauthorizedError,
      )
      expect(trace(hops, gw, as)[0]).toBe('POST GW/mcp/docs 403')
      expect(hops[0]?.challenge).toBe(
        `Bearer error="insufficient_scope", scope="mcp:tools docs:write", resource_metadata="${prm}"`,
      )
      expect(backend.requests).toHaveLength(0)
      expect(user.authorizations).toHaveLength(2)
      expect(user.authorizations[1]?.searchParams.get('scope')?.split(' ')).toEqual(
        expect.arrayContaining(required),
      )
      await second.transport.finishAuth(user.callback!.searchParams)
      expect(String(decodeJwt(user.accessToken()).scope).split(' ')).toEqual(
        expect.arrayContaining(required),
      )

      const third = clientFor(url, user, hops, options)
      await third.client.connect(third.transport)
      const result = await third.client.callTool({
        name: 'get_forecast',
        arguments: { city: 'Kyiv' },
      })
      expect(textOf(result)).toContain('Kyiv')
      expect(backend.calls('tools/call')[0]?.header('mcp-protocol-version')).toBe(era)
      expect(as.signIns).toBe(2)
      expect(as.errors).toEqual([])
    },
  )
})
