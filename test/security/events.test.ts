import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpHeaders, mcpBody, mcpPost, rawPost } from '../helpers/clients.js'
import { startEventsServer } from '../helpers/events-server.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'

/**
 * The events extension (docs/events.md): an event type no rule allows is unknown and never
 * reaches the backend, whether the backend checks headers or not; the name is read from the body
 * (the extension mirrors it into no header); a backend is never told to POST webhooks where
 * `events.callbacks` does not allow, policies or not.
 */

const POLICY = `
rules:
  - name: ci
    servers: ["*"]
    allow:
      events: ["ci.failed"]
`

function policyDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-events-sec-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), POLICY)
  return dir
}

describe.each([false, true])('event policy (trustHeaders: %s)', (trustHeaders) => {
  async function setup() {
    const backend = await closing(startEventsServer())
    const gw = await startTestGateway(
      { ...oneServer(backend.url, { trustHeaders }), policies: '.' },
      { dir: policyDir() },
    )
    return { backend, gw }
  }

  it('serves an allowed event type and answers every other as unknown, forwarding nothing', async () => {
    const { backend, gw } = await setup()
    const ok = await mcpPost(gw.mcpUrl('app'), 'events/poll', { name: 'ci.failed' })
    expect(ok.status).toBe(200)
    expect(ok.response().result).toMatchObject({ events: [] })
    for (const method of ['events/poll', 'events/stream', 'events/subscribe']) {
      const res = await mcpPost(
        gw.mcpUrl('app'),
        method,
        { name: 'ci.secret_rotated', delivery: { url: 'https://x.example/', secret: 's' } },
        { id: 'q' },
      )
      expect(res.status).toBe(200)
      expect(res.response()).toEqual({
        jsonrpc: '2.0',
        id: 'q',
        error: { code: -32602, message: 'Unknown event: ci.secret_rotated' },
      })
    }
    expect(backend.calls('events/poll')).toHaveLength(1)
    expect(backend.calls('events/stream')).toEqual([])
    expect(backend.calls('events/subscribe')).toEqual([])
  })

  it('judges the body’s name, not an Mcp-Name that names an allowed type', async () => {
    const { backend, gw } = await setup()
    const res = await rawPost(
      gw.mcpUrl('app'),
      mcpBody('events/poll', { name: 'ci.secret_rotated' }),
      { ...mcpHeaders('events/poll', 'ci.failed') },
    )
    expect(res.status).toBe(400)
    expect(res.response()).toMatchObject({ id: 1, error: { code: -32020 } })
    expect(backend.calls('events/poll')).toEqual([])
  })

  it('refuses an events/poll without a name (nothing to judge)', async () => {
    const { backend, gw } = await setup()
    const res = await mcpPost(gw.mcpUrl('app'), 'events/poll', {})
    expect(res.status).toBe(400)
    expect(res.response()).toMatchObject({ id: 1, error: { code: -32602 } })
    expect(backend.calls('events/poll')).toEqual([])
  })
})

describe.each([false, true])(
  'event callbacks without policies (trustHeaders: %s)',
  (trustHeaders) => {
    it.each([
      ['http://169.254.169.254/latest/meta-data/', ['*']],
      ['http://127.0.0.1:9/hook', ['https://*']],
      ['https://10.0.0.5/hook', ['https://*']],
      ['https://hooks.example.com/x', []],
      // IPv6 transition forms are judged by the IPv4 address they carry (docs/events.md).
      ['https://[64:ff9b:1::a00:5]/hook', ['https://*']],
      ['https://[::a00:5]/hook', ['https://*']],
      ['https://[2002:a00:5::]/hook', ['https://*']],
      ['https://[2001:0:4136:e378:8000:63bf:f5ff:fffa]/hook', ['https://*']],
      ['https://[64:ff9b::a9fe:a9fe]/latest/meta-data/', ['https://[64:ff9b::a9fe:a9fe]']],
      ['https://localhost.localdomain/hook', ['https://*']],
      ['https://localhost../hook', ['https://*']],
    ])('never lets the backend POST to %s (callbacks %j)', async (url, callbacks) => {
      const backend = await closing(startEventsServer())
      const gw = await startTestGateway(
        // No events.callbacks at all is the default: every callback refused.
        oneServer(backend.url, {
          trustHeaders,
          ...(callbacks.length > 0 && { events: { callbacks } }),
        }),
      )
      const res = await mcpPost(
        gw.mcpUrl('app'),
        'events/subscribe',
        { name: 'ci.failed', delivery: { mode: 'webhook', url, secret: 'whsec_AAAA' } },
        { id: 5 },
      )
      expect(res.status).toBe(400)
      expect(res.response()).toMatchObject({
        id: 5,
        error: { code: -32602, data: { reason: 'invalid_params' } },
      })
      expect(res.headers['x-mcp-gateway-error']).toBe('invalid_params')
      expect(backend.calls('events/subscribe')).toEqual([])
    })
  },
)
