import { describe, expect, it } from 'vitest'
import { connectClient, connectLegacyClient } from '../helpers/clients.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'
import { openConnectLink, userAuthWorld } from '../helpers/user-auth.js'

const CONNECT_META = 'io.github.mcp-edge/connect'

describe('userAuth through a virtual server', () => {
  it('leaves a waiting member out of lists (saying so), and its calls ask for that service', async () => {
    const weather = await closing(startSdkServer({ name: 'weather' }))
    const w = await userAuthWorld({
      extra: {
        servers: { weather: { upstreams: [{ url: weather.url }] } },
        virtualServers: { workspace: { members: ['tracker', 'weather'], prefix: 'always' } },
      },
    })
    const url = w.gw.mcpUrl('workspace')
    const alice = await closing(
      connectClient(url, {
        auth: await w.token('alice', 'workspace'),
        capabilities: { elicitation: { url: {} } },
      }),
    )
    const before = await alice.listTools()
    const names = before.tools.map((t) => t.name)
    expect(names).toContain('weather_get_forecast')
    expect(names.some((n) => n.startsWith('tracker_'))).toBe(false)
    const waiting = (before._meta?.[CONNECT_META] ?? []) as { server: string; connectUrl: string }[]
    expect(waiting).toEqual([expect.objectContaining({ server: 'tracker', service: 'Tracker' })])
    expect(w.tracker.requests).toHaveLength(0)
    // The link in the list's _meta connects alice; the next list has the member's tools.
    expect((await openConnectLink(waiting[0]?.connectUrl ?? '', w.idp, w.as, 'alice')).status).toBe(
      200,
    )
    const after = await alice.listTools()
    expect(after.tools.map((t) => t.name)).toContain('tracker_whoami')
    expect(after._meta?.[CONNECT_META]).toBeUndefined()
    expect(textOf(await alice.callTool({ name: 'tracker_whoami', arguments: {} }))).toBe(
      'user:alice',
    )

    // bob has not connected: calling the member's tool asks him, naming the service.
    const bob = await closing(
      connectClient(url, {
        auth: await w.token('bob', 'workspace'),
        capabilities: { elicitation: { url: {} } },
      }),
    )
    const messages: string[] = []
    bob.setRequestHandler('elicitation/create', async (req) => {
      const params = req.params as { url: string; message: string }
      messages.push(params.message)
      expect((await openConnectLink(params.url, w.idp, w.as, 'bob')).status).toBe(200)
      return { action: 'accept' }
    })
    expect(textOf(await bob.callTool({ name: 'tracker_whoami', arguments: {} }))).toBe('user:bob')
    expect(messages).toHaveLength(1)
    expect(messages[0]).toContain('Tracker')
    // The other member needs no connection.
    expect(textOf(await bob.callTool({ name: 'weather_whoami', arguments: {} }))).toBe('weather')

    // A 2025-era client of the virtual server: -32042 for the member, then its own account.
    const legacy = await closing(
      connectLegacyClient(url, {
        auth: await w.token('carol', 'workspace'),
        capabilities: { elicitation: { url: {} } },
      }),
    )
    const err = await legacy
      .callTool({ name: 'tracker_whoami', arguments: {} })
      .catch((e: unknown) => e)
    expect((err as { code?: number }).code).toBe(-32042)
    const link = (err as { elicitations: { url: string }[] }).elicitations[0]?.url ?? ''
    expect((await openConnectLink(link, w.idp, w.as, 'carol')).status).toBe(200)
    expect(textOf(await legacy.callTool({ name: 'tracker_whoami', arguments: {} }))).toBe(
      'user:carol',
    )
    expect(w.tracker.served).toEqual(
      ['alice', 'alice', 'bob', 'carol'].slice(0, w.tracker.served.length),
    )
  })
})
