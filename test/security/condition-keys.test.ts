import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpBody, mcpHeaders, mcpPost, rawPost } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/**
 * A key a policy condition reads, spelled so another JSON reader takes a different key for it
 * (docs/security.md §What the gateway reads in a body): `has(args.bcc)` sees no `bcc` in
 * `{"Bcc":…}`, while a Go backend whose struct field is `bcc` (encoding/json matches it without
 * case when no field is spelled `Bcc`), or a C reader that stops at NUL (`bcc\u0000`), sends the
 * blind copy. Alone, without the exact key next to it, such a key is refused at every level a
 * condition reads, on the direct route with either `trustHeaders` and through a virtual server,
 * and the backend (an official SDK server) receives nothing.
 */

const POLICY = `
rules:
  - name: mail
    servers: ["*"]
    allow: { tools: [send_email, notify] }
  - name: no-blind-copies
    servers: ["*"]
    deny: { tools: [send_email] }
    if: 'has(args.bcc) || has(args.headers) && has(args.headers.bcc)'
  - name: no-bcc-keys
    servers: ["*"]
    deny: { tools: [notify] }
    if: 'args.exists(k, k == "bcc")'
`

/** The direct endpoints (trustHeaders false and true) and a virtual server over each. */
const ENDPOINTS = ['mail', 'mail-trusted', 'desk', 'desk-trusted'] as const

async function setup() {
  const backend = await closing(startSdkServer({ extraTools: ['send_email', 'notify'] }))
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-condition-keys-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), POLICY)
  const upstreams = [{ url: backend.url }]
  const gw = await startTestGateway(
    {
      policies: '.',
      servers: {
        mail: { upstreams, trustHeaders: false },
        'mail-trusted': { upstreams, trustHeaders: true },
      },
      virtualServers: {
        desk: { members: ['mail'], prefix: 'never' },
        'desk-trusted': { members: ['mail-trusted'], prefix: 'never' },
      },
    },
    { dir },
  )
  // The virtual servers learn who serves what, so a call could be routed on its headers alone.
  for (const v of ['desk', 'desk-trusted'])
    expect((await mcpPost(gw.mcpUrl(v), 'tools/list', {}, { id: 1 })).status).toBe(200)
  return { backend, gw }
}

/** A tools/call of `tool` whose arguments are exactly the JSON text `args`. */
function callText(tool: string, args: string, id: string | number = 7): string {
  const body = JSON.stringify(mcpBody('tools/call', { name: tool, arguments: {} }, id))
  return body.replace('"arguments":{}', `"arguments":${args}`)
}

describe('a lone key another reader takes for one a condition reads', () => {
  it.each([
    ['a case variant', 'send_email', '{"to":"a@example.com","Bcc":"spy@elsewhere.test"}'],
    ['all upper case', 'send_email', '{"to":"a@example.com","BCC":"spy@elsewhere.test"}'],
    ['a key cut at NUL', 'send_email', '{"to":"a@example.com","bcc\\u0000":"spy@elsewhere.test"}'],
    ['one level down', 'send_email', '{"to":"a","headers":{"Bcc":"spy@elsewhere.test"}}'],
    ['a key read by a comprehension', 'notify', '{"to":"a","Bcc":"spy@elsewhere.test"}'],
  ])(
    '%s → 400 -32600 case_variant_key on every route, nothing forwarded',
    async (_, tool, args) => {
      const { backend, gw } = await setup()
      for (const endpoint of ENDPOINTS) {
        const res = await rawPost(
          gw.mcpUrl(endpoint),
          callText(tool, args),
          mcpHeaders('tools/call', tool),
        )
        expect(res.status, `${endpoint}: ${res.text}`).toBe(400)
        expect(res.headers['x-mcp-gateway-error']).toBe('case_variant_key')
        expect(res.json()).toMatchObject({
          jsonrpc: '2.0',
          id: 7,
          error: { code: -32600, data: { reason: 'case_variant_key' } },
        })
      }
      expect(backend.calls('tools/call')).toHaveLength(0)
      // The exact key is the one the condition judges: denied in band, still nothing forwarded.
      const exact = args.replace(/"(Bcc|BCC|bcc\\u0000)"/, '"bcc"')
      for (const endpoint of ENDPOINTS) {
        const res = await rawPost(
          gw.mcpUrl(endpoint),
          callText(tool, exact),
          mcpHeaders('tools/call', tool),
        )
        expect(res.status, endpoint).toBe(200)
        expect(res.json()).toMatchObject({
          id: 7,
          error: { code: -32602, message: `Unknown tool: ${tool}` },
        })
      }
      expect(backend.calls('tools/call')).toHaveLength(0)
    },
  )

  it('__proto__ where a condition reads → 400 -32600 prototype_key on every route, nothing forwarded', async () => {
    const { backend, gw } = await setup()
    const args = '{"to":"a@example.com","__proto__":{"bcc":"spy@elsewhere.test"}}'
    for (const endpoint of ENDPOINTS) {
      const res = await rawPost(
        gw.mcpUrl(endpoint),
        callText('send_email', args, 'p-1'),
        mcpHeaders('tools/call', 'send_email'),
      )
      expect(res.status, `${endpoint}: ${res.text}`).toBe(400)
      expect(res.json()).toMatchObject({
        id: 'p-1',
        error: { code: -32600, data: { reason: 'prototype_key' } },
      })
    }
    expect(backend.calls('tools/call')).toHaveLength(0)
  })

  it('keys no condition reads pass as they are, on every route', async () => {
    const { backend, gw } = await setup()
    // (What any condition of the server reads is judged on every call to it: `notify`'s reads
    // every key and all below, so a `Bcc` under another key would be refused here too.)
    const args = '{"To":"a@example.com","subject":"hi","Headers2":{"Cc":"x"},"bc":"y"}'
    for (const endpoint of ENDPOINTS) {
      const res = await rawPost(
        gw.mcpUrl(endpoint),
        callText('send_email', args),
        mcpHeaders('tools/call', 'send_email'),
      )
      expect(res.status, `${endpoint}: ${res.text}`).toBe(200)
      expect(res.json()).toMatchObject({ id: 7, result: { content: [{ text: 'send_email' }] } })
    }
    const seen = backend.calls('tools/call').map((r) => r.body.toString('utf8'))
    expect(seen).toHaveLength(ENDPOINTS.length)
    for (const body of seen) expect(body).toContain(`"arguments":${args}`)
  })
})
