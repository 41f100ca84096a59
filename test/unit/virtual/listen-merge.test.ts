import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import pino from 'pino'
import { Agent } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { Invalidation } from '../../../src/mcp/changes.js'
import { ListenStream } from '../../../src/client/listen-stream.js'
import { SessionStreams } from '../../../src/client/session-stream.js'
import { LegacyGetStream } from '../../../src/client/legacy-get-stream.js'
import { ListenMerge, memberFilter, type ListenMember } from '../../../src/virtual/listen-merge.js'
import { closing } from '../../helpers/lifecycle.js'
import {
  sseEvent,
  startNonValidatingBackend,
  startSdkServer,
  type TestServer,
} from '../../helpers/sdk-servers.js'

const SUB = 'io.modelcontextprotocol/subscriptionId'
const log = pino({ level: 'silent' })

function member(
  name: string,
  server: TestServer,
  caps: Record<string, unknown>,
  era: 'modern' | 'legacy' = 'modern',
): ListenMember {
  const dispatcher = new Agent()
  onTestFinished(() => dispatcher.close())
  // a 2025-only member's stream is the one of the member session, re-opened in the same session
  const streams = new SessionStreams()
  const session = {}
  let leases = 0
  return {
    name,
    capabilities: caps,
    acquire: () => {
      leases++
      const ep = {
        url: server.url,
        headers: [],
        dispatcher,
        headersTimeoutMs: 5000,
        bodyTimeoutMs: 0,
      }
      return {
        open: (filter, id, onChange) =>
          era === 'modern'
            ? new ListenStream(ep, filter, id, onChange)
            : new LegacyGetStream(
                streams,
                session,
                { ...ep, headers: ['accept', 'text/event-stream'] },
                filter,
                onChange,
              ),
        release: () => void leases--,
      }
    },
    get leases() {
      return leases
    },
  } as ListenMember
}

/** Hosts one merge per request and reads the client's side of it as JSON-RPC messages. */
async function mergedStream(
  members: ListenMember[],
  filter: Record<string, unknown>,
  changes: [string, Invalidation][] = [],
  mode: 'listen' | 'get' = 'listen',
): Promise<{ messages: Record<string, unknown>[]; ended: Promise<void>; close(): void }> {
  const server: Server = createServer((_req, res) => {
    new ListenMerge(res, {
      members,
      filter,
      memberForUri: (uri) => (uri.startsWith('docs://') ? 0 : undefined),
      rawId: '"listen:0"',
      ackTimeoutMs: 2000,
      onChange: (m, what) => changes.push([m, what]),
      log,
      backoff: { baseMs: 10, maxMs: 50 },
      mode,
    }).start()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  onTestFinished(() => new Promise<void>((r) => server.close(() => r())))
  const abort = new AbortController()
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {
    signal: abort.signal,
  })
  expect(res.headers.get('content-type')).toBe('text/event-stream')
  const messages: Record<string, unknown>[] = []
  const ended = (async () => {
    let text = ''
    const decoder = new TextDecoder()
    try {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true })
        let end
        while ((end = text.indexOf('\n\n')) >= 0) {
          const data = text
            .slice(0, end)
            .split('\n')
            .filter((l) => l.startsWith('data: '))
            .map((l) => l.slice(6))
          text = text.slice(end + 2)
          if (data.length > 0) messages.push(JSON.parse(data.join('\n')) as Record<string, unknown>)
        }
      }
    } catch {
      // aborted by the test
    }
  })()
  onTestFinished(() => abort.abort())
  return { messages, ended, close: () => abort.abort() }
}

describe('memberFilter', () => {
  it('asks a member only for what it offers and the URIs it serves', () => {
    const requested = {
      toolsListChanged: true,
      promptsListChanged: true,
      resourceSubscriptions: ['docs://a', 'tickets://1'],
    }
    const serves = (u: string) => u.startsWith('docs://')
    expect(memberFilter(requested, { tools: { listChanged: true } }, serves)).toEqual({
      toolsListChanged: true,
    })
    expect(memberFilter(requested, { resources: { subscribe: true } }, serves)).toEqual({
      resourceSubscriptions: ['docs://a'],
    })
    expect(memberFilter(requested, { tools: {} }, serves)).toBeUndefined()
  })
})

describe('ListenMerge', () => {
  it('acknowledges once with the client id, after both members, and forwards each change once', async () => {
    const a = await closing(startSdkServer({ name: 'a' }))
    const b = await closing(startSdkServer({ name: 'b' }))
    const caps = { tools: { listChanged: true }, resources: { subscribe: true } }
    const changes: [string, Invalidation][] = []
    const client = await mergedStream(
      [member('a', a, caps), member('b', b, caps)],
      { toolsListChanged: true, resourceSubscriptions: ['docs://readme'] },
      changes,
    )
    await expect.poll(() => client.messages.length).toBe(1)
    expect(client.messages[0]).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: {
        notifications: { toolsListChanged: true, resourceSubscriptions: ['docs://readme'] },
        _meta: { [SUB]: 'listen:0' },
      },
    })
    expect(a.calls('subscriptions/listen')).toHaveLength(1)
    expect(b.calls('subscriptions/listen')).toHaveLength(1)
    // the URI went to the member that serves it only
    expect(JSON.stringify(b.calls('subscriptions/listen')[0]?.json())).not.toContain('docs://')

    b.notify.toolsChanged()
    await expect.poll(() => client.messages.length).toBe(2)
    expect(client.messages[1]).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/tools/list_changed',
      params: { _meta: { [SUB]: 'listen:0' } },
    })
    expect(changes).toEqual([['b', { kind: 'tools' }]])

    a.notify.resourceUpdated('docs://readme')
    await expect.poll(() => client.messages.length).toBe(3)
    expect(client.messages[2]).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/resources/updated',
      params: { uri: 'docs://readme', _meta: { [SUB]: 'listen:0' } },
    })
    expect(client.messages).toHaveLength(3)
  })

  it('re-opens a member stream that breaks; the client stream goes on', async () => {
    const ack = sseEvent({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: { toolsListChanged: true } },
    })
    let listens = 0
    const flaky = await closing(
      startNonValidatingBackend({
        behaviour: (_req, body) => {
          if ((body as { method?: string }).method !== 'subscriptions/listen') return 'normal'
          listens++
          // the first stream ends right after its acknowledgement; the next one stays open
          return listens === 1 ? { sse: [ack], end: true } : { sse: [ack], end: false }
        },
      }),
    )
    const steady = await closing(startSdkServer({ name: 'steady' }))
    const caps = { tools: { listChanged: true } }
    const changes: [string, Invalidation][] = []
    const client = await mergedStream(
      [member('flaky', flaky, caps), member('steady', steady, caps)],
      { toolsListChanged: true },
      changes,
    )
    await expect.poll(() => listens).toBe(2)
    // the gap is announced: a change while the stream was down would otherwise be lost
    await expect
      .poll(() => client.messages.map((m) => m.method))
      .toEqual(['notifications/subscriptions/acknowledged', 'notifications/tools/list_changed'])
    expect(changes).toEqual([['flaky', { kind: 'tools' }]])
    steady.notify.toolsChanged()
    await expect.poll(() => client.messages.length).toBe(3)
    expect(client.messages[2]?.method).toBe('notifications/tools/list_changed')
    expect(changes.at(-1)).toEqual(['steady', { kind: 'tools' }])
  })

  it('ends gracefully when no member offers anything asked for', async () => {
    const a = await closing(startSdkServer({ name: 'a' }))
    const client = await mergedStream([member('a', a, { tools: {} })], { toolsListChanged: true })
    await client.ended
    expect(client.messages.map((m) => m.method ?? m.id)).toEqual([
      'notifications/subscriptions/acknowledged',
      'listen:0',
    ])
    expect(a.calls('subscriptions/listen')).toHaveLength(0)
  })

  it('get mode: 2025-era notifications from 2025-only members; a 405 is not asked again', async () => {
    let refusals = 0
    const old = await closing(startNonValidatingBackend())
    const none = await closing(
      startNonValidatingBackend({
        behaviour: (req) => {
          if (req.method !== 'GET') return 'normal'
          refusals++
          return { status: 405, headers: { allow: 'POST' }, body: '' }
        },
      }),
    )
    const caps = { tools: { listChanged: true }, prompts: { listChanged: true } }
    const changes: [string, Invalidation][] = []
    const client = await mergedStream(
      [member('none', none, caps, 'legacy'), member('old', old, caps, 'legacy')],
      { toolsListChanged: true, promptsListChanged: true },
      changes,
      'get',
    )
    await expect.poll(() => old.requests.filter((r) => r.method === 'GET').length).toBe(1)
    await expect.poll(() => refusals).toBe(1)
    old.notify.toolsChanged()
    old.notify.promptsChanged()
    await expect.poll(() => client.messages.length).toBe(2)
    // no acknowledgement, no subscription id: what a 2025-era server sends on its GET stream
    expect(client.messages).toEqual([
      { jsonrpc: '2.0', method: 'notifications/tools/list_changed' },
      { jsonrpc: '2.0', method: 'notifications/prompts/list_changed' },
    ])
    expect(changes.map(([m]) => m)).toEqual(['old', 'old'])
    old.notify.toolsChanged()
    await expect.poll(() => client.messages.length).toBe(3)
    expect(refusals).toBe(1)
  })
})
