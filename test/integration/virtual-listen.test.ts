import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { startDocsServer } from '../../deploy/demo/docs-server.js'
import { startWeatherServer } from '../../deploy/demo/weather-server.js'
import { connectClient, mcpPost } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { sseEvent, startNonValidatingBackend, startSdkServer } from '../helpers/sdk-servers.js'

const PUBLIC = { ttlMs: 60_000, cacheScope: 'public' as const }

function upstreams(members: Record<string, { readonly url: string }>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(members).map(([name, s]) => [name, { upstreams: [{ url: s.url }] }]),
  )
}

describe('subscriptions/listen on a virtual server (v2 client, auto)', () => {
  it('merges the members’ streams; a list_changed arrives once and invalidates the merged list', async () => {
    const weather = await closing(startWeatherServer())
    const docs = await closing(startDocsServer())
    const tickets = await closing(
      startSdkServer({ name: 'tickets', cacheHints: { 'tools/list': PUBLIC } }),
    )
    const gw = await startTestGateway({
      cache: {},
      servers: upstreams({ weather, docs, tickets }),
      virtualServers: {
        workspace: {
          members: ['weather', 'docs', 'tickets'],
          prefix: 'always',
          resources: { 'docs://*': 'docs' },
        },
      },
    })
    const client = await closing(connectClient(gw.mcpUrl('workspace')))
    const changes: unknown[] = []
    client.setNotificationHandler('notifications/tools/list_changed', (n) => void changes.push(n))
    await client.listTools()
    await client.listTools() // merged answer served from the gateway
    const listsBefore = tickets.calls('tools/list').length

    const subscription = await client.listen({ toolsListChanged: true, promptsListChanged: true })
    onTestFinished(() => subscription.close())
    expect(subscription.honoredFilter).toMatchObject({ toolsListChanged: true })
    // every member that offers list_changed got one listen stream of its own (next to the
    // cache's own listen stream, which has ids of its own)
    const ours = () =>
      tickets
        .calls('subscriptions/listen')
        .filter((r) => String((r.json() as { id: unknown }).id).startsWith('mcp-edge-virtual'))
    await expect.poll(() => ours().length).toBe(1)
    const memberListen = ours()[0]?.json() as {
      params: { notifications: Record<string, unknown> }
    }
    expect(memberListen.params.notifications).toMatchObject({ toolsListChanged: true })

    tickets.notify.toolsChanged()
    await expect.poll(() => changes.length).toBe(1)
    await client.listTools()
    // the merged list was invalidated: the gateway asked the member again
    expect(tickets.calls('tools/list').length).toBeGreaterThan(listsBefore)
    expect(changes).toHaveLength(1)
    expect(subscription.closed).toBeDefined()
  })

  it('re-opens a member stream that breaks, without ending the client’s', async () => {
    const ack = sseEvent({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: { toolsListChanged: true } },
    })
    let listens = 0
    const flaky = await closing(
      startNonValidatingBackend({
        behaviour: (_req, body) => {
          if ((body as { method?: string } | undefined)?.method !== 'subscriptions/listen')
            return 'normal'
          listens++
          // the first stream breaks right after its acknowledgement; the next one stays open
          return listens === 1 ? { sse: [ack], end: true } : { sse: [ack], end: false }
        },
      }),
    )
    const tickets = await closing(startSdkServer({ name: 'tickets' }))
    const gw = await startTestGateway({
      servers: upstreams({ flaky, tickets }),
      virtualServers: { workspace: { members: ['flaky', 'tickets'] } },
    })
    const client = await closing(connectClient(gw.mcpUrl('workspace')))
    const changes: unknown[] = []
    client.setNotificationHandler('notifications/tools/list_changed', (n) => void changes.push(n))
    const subscription = await client.listen({ toolsListChanged: true })
    onTestFinished(() => subscription.close())
    await expect.poll(() => listens, { timeout: 5000 }).toBe(2)
    // once back, the member's kinds are announced: a change in the gap is not lost
    await expect.poll(() => changes.length).toBe(1)
    tickets.notify.toolsChanged()
    await expect.poll(() => changes.length).toBe(2)
  })

  it('counts the merged stream against the caller’s stream budget', async () => {
    const tickets = await closing(startSdkServer({ name: 'tickets' }))
    const gw = await startTestGateway({
      limits: { maxStreamsPerPrincipal: 1 },
      servers: upstreams({ tickets }),
      virtualServers: { workspace: { members: ['tickets'] } },
    })
    const client = await closing(connectClient(gw.mcpUrl('workspace')))
    const subscription = await client.listen({ toolsListChanged: true })
    onTestFinished(() => subscription.close())
    await expect.poll(() => tickets.calls('subscriptions/listen').length).toBe(1)
    const second = await mcpPost(
      gw.mcpUrl('workspace'),
      'subscriptions/listen',
      { notifications: { toolsListChanged: true } },
      { id: 'listen:9' },
    )
    expect(second.status).toBe(429)
    const refused = second.json() as { id: unknown; error: unknown }
    expect(refused.error).toMatchObject({
      code: -31029,
      data: { source: 'gateway', reason: 'too_many_streams' },
    })
    expect(refused.id).toBe('listen:9')
    expect(tickets.calls('subscriptions/listen')).toHaveLength(1)
  })

  it('refuses a listen that subscribes to a resource its member denies; no member sees it', async () => {
    const tickets = await closing(startSdkServer({ name: 'tickets' }))
    const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-virtual-listen-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(
      join(dir, 'main.yaml'),
      'rules:\n  - name: readme-only\n    servers: [tickets]\n    allow:\n      tools: ["*"]\n      resources: ["docs://readme"]\n',
    )
    const gw = await startTestGateway(
      {
        policies: '.',
        servers: upstreams({ tickets }),
        virtualServers: { workspace: { members: ['tickets'] } },
      },
      { dir },
    )
    const listed = await mcpPost(gw.mcpUrl('workspace'), 'resources/list', {})
    expect(listed.status).toBe(200)
    const res = await mcpPost(
      gw.mcpUrl('workspace'),
      'subscriptions/listen',
      { notifications: { resourceSubscriptions: ['docs://readme', 'docs://changelog'] } },
      { id: 'listen-1', timeoutMs: 5000 },
    )
    expect(res.status).toBe(200)
    expect(res.text).toBe(
      '{"jsonrpc":"2.0","id":"listen-1","error":{"code":-32602,"message":"Resource not found: docs://changelog","data":{"uri":"docs://changelog"}}}',
    )
    expect(tickets.calls('subscriptions/listen')).toHaveLength(0)
  })
})
