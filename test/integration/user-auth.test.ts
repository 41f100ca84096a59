import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfigText } from '../../src/runtime/load.js'
import { connectClient, connectLegacyClient } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import {
  openConnectLink,
  startProvider,
  startTracker,
  type TestProvider,
  type TrackerServer,
} from '../helpers/user-auth.js'

const KEY = randomBytes(32).toString('base64')

interface World {
  readonly gw: TestGateway
  readonly idp: TestProvider
  readonly as: TestProvider
  readonly tracker: TrackerServer
  /** The organisation's token of `account` for the gateway's server `server`. */
  token(account: string, server?: string): Promise<string>
}

/** The IdP, the service's AS, the tracker behind it, and a gateway in front with userAuth. */
async function world(extra: Record<string, unknown> = {}): Promise<World> {
  const idp = await closing(startProvider())
  const as = await closing(startProvider())
  const tracker = await closing(startTracker(as))
  const config = (publicUrl: string, login: object, service: object) => ({
    auth: { publicUrl, jwt: { issuer: idp.issuer, jwksUrl: idp.jwksUri } },
    userTokens: { key: KEY, login },
    servers: {
      tracker: {
        upstreams: [{ url: tracker.url }],
        userAuth: { issuer: as.issuer, scopes: ['issues:read'], title: 'Tracker', ...service },
      },
    },
    ...extra,
  })
  const pending = { clientId: 'pending', clientSecret: 'pending' }
  const gw = await startTestGateway(config('http://127.0.0.1', pending, pending), { admin: false })
  const login = await idp.register([`${gw.url}/connect`])
  const service = await as.register([`${gw.url}/connect/tracker/callback`])
  const text = stringify({
    listen: { host: '127.0.0.1', port: 0 },
    log: { level: 'info' },
    ...config(gw.url, login, service),
  })
  await gw.reload(parseConfigText(text, { dir: process.cwd(), env: {} }))
  return {
    gw,
    idp,
    as,
    tracker,
    token: (account, server = 'tracker') => idp.issueToken(gw.mcpUrl(server), 'mcp:tools', account),
  }
}

describe('per-user credentials (userAuth)', () => {
  it('2026-07-28: the first call asks to connect; after the connect page it runs as that user', async () => {
    const w = await world()
    const token = await w.token('alice')
    const client = await closing(
      connectClient(w.gw.mcpUrl('tracker'), {
        auth: token,
        capabilities: { elicitation: { url: {} } },
      }),
    )
    const prompts: { url: string; message: string }[] = []
    client.setRequestHandler('elicitation/create', async (req) => {
      const params = req.params as { mode: string; url: string; message: string }
      prompts.push(params)
      const outcome = await openConnectLink(params.url, w.idp, w.as, 'alice')
      expect(outcome.status).toBe(200)
      expect(outcome.page).toContain('Tracker')
      return { action: 'accept' }
    })
    const result = await client.callTool({ name: 'whoami', arguments: {} })
    expect(textOf(result)).toBe('user:alice')
    expect(prompts).toHaveLength(1)
    expect(prompts[0]?.message).toContain('Tracker')
    expect(w.tracker.served).toEqual(['alice'])
  })

  it('2025-11-25: initialize answers -32042 naming the connect page; connected, calls run as the user', async () => {
    const w = await world()
    const token = await w.token('bob')
    const err = await connectLegacyClient(w.gw.mcpUrl('tracker'), {
      auth: token,
      capabilities: { elicitation: { url: {} } },
    }).catch((e: unknown) => e)
    const elicitations = (err as { elicitations?: { url: string }[] }).elicitations
    expect((err as { code?: number }).code).toBe(-32042)
    const url = elicitations?.[0]?.url ?? ''
    expect(url.startsWith(`${w.gw.url}/connect/tracker?state=`)).toBe(true)
    expect(w.tracker.requests).toHaveLength(0)
    const outcome = await openConnectLink(url, w.idp, w.as, 'bob')
    expect(outcome.status).toBe(200)
    const client = await closing(connectLegacyClient(w.gw.mcpUrl('tracker'), { auth: token }))
    const result = await client.callTool({ name: 'whoami', arguments: {} })
    expect(textOf(result)).toBe('user:bob')
  })
})
