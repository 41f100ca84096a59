import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { UnauthorizedError } from '@modelcontextprotocol/client'
import { decodeJwt } from 'jose'
import { describe, expect, it } from 'vitest'
import { gatewayTrusting, startAuthorizationServer } from '../helpers/authorization-server.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { ERAS, InMemoryOAuthClient, clientFor, trace, type Hop } from '../helpers/oauth-client.js'
import { startSdkServer } from '../helpers/sdk-servers.js'
import { selfSigned } from '../helpers/tls.js'

/**
 * A client that publishes its metadata at an https URL and uses that URL as its `client_id`
 * (OAuth Client ID Metadata Document, the MCP authorization spec's alternative to dynamic
 * registration) signs in through the gateway without registering. The gateway's part is the
 * same as for any client; this shows the official client and oidc-provider agree on it.
 */

/** A client's metadata document, served at https://127.0.0.1:<port>/client.json. */
interface PublishedMetadata {
  readonly url: string
  /** How many times it was fetched. */
  readonly fetches: number
  /** What is served, with `client_id` = `url` added. */
  metadata: object
  close(): Promise<void>
}

async function publishMetadata(tls: { key: string; cert: string }): Promise<PublishedMetadata> {
  const server = createServer(tls, (req, res) => {
    if (req.url !== '/client.json') return void res.writeHead(404).end()
    fetches += 1
    const body = JSON.stringify({ ...published.metadata, client_id: published.url })
    res.writeHead(200, { 'content-type': 'application/json' }).end(body)
  })
  let fetches = 0
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const published: PublishedMetadata = {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/client.json`,
    get fetches() {
      return fetches
    },
    metadata: {},
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
  return published
}

describe('sign in with a client ID metadata document (no registration)', () => {
  it.each(ERAS)('$era: client_id is the metadata URL; tools work', async ({ era, options }) => {
    const tls = await selfSigned()
    const as = await closing(startAuthorizationServer({ clientMetadataCa: tls.cert }))
    const backend = await closing(startSdkServer())
    const gw = await gatewayTrusting(as, { weather: backend })
    const url = gw.mcpUrl('weather')
    const published = await closing(publishMetadata(tls))
    const user = new InMemoryOAuthClient(as, published.url)
    published.metadata = user.clientMetadata
    const hops: Hop[] = []

    const first = clientFor(url, user, hops, options)
    await expect(first.client.connect(first.transport)).rejects.toBeInstanceOf(UnauthorizedError)
    // Discovery, then straight to the browser: no POST /reg.
    expect(trace(hops, gw, as)).toEqual([
      'POST GW/mcp/weather 401',
      'GET GW/.well-known/oauth-protected-resource/mcp/weather 200',
      'GET AS/.well-known/oauth-authorization-server 200',
    ])
    expect(user.authorizations[0]?.searchParams.get('client_id')).toBe(published.url)
    expect(published.fetches).toBeGreaterThanOrEqual(1) // the AS read the document
    await first.transport.finishAuth(user.callback!.searchParams)
    expect(decodeJwt(user.accessToken())).toMatchObject({ client_id: published.url, aud: url })

    const next = clientFor(url, user, hops, options)
    await next.client.connect(next.transport)
    const result = await next.client.callTool({ name: 'get_forecast', arguments: { city: 'Rome' } })
    expect(textOf(result)).toContain('Rome')
    expect(backend.calls('tools/call')[0]?.header('mcp-protocol-version')).toBe(era)
    expect(as.requests.filter((r) => r === 'POST /reg')).toEqual([])
    expect(as.errors).toEqual([])
  })
})
