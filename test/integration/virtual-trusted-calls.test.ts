import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpHeaders, mcpPost, rawPost } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startNonValidatingBackend } from '../helpers/sdk-servers.js'

// A virtual server over a member with `trustHeaders: true` routes that member's tools/call on its
// headers without reading the body, exactly as the member's own endpoint would judge it
// (docs/virtual-servers.md "What is judged"); everything else is still parsed and checked.

function policyDir(rules: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-virtual-trusted-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), rules)
  return dir
}

async function setup() {
  const fast = await closing(startNonValidatingBackend({ tools: ['echo', 'delete_repo'] }))
  const strict = await closing(startNonValidatingBackend({ tools: ['lookup'] }))
  const dir = policyDir(`
rules:
  - name: all
    servers: ["*"]
    allow:
      tools: ["*"]
  - name: no-deletes
    servers: ["*"]
    deny:
      tools: ["delete_*"]
`)
  const gw = await startTestGateway(
    {
      policies: '.',
      servers: {
        fast: { upstreams: [{ url: fast.url }], trustHeaders: true },
        strict: { upstreams: [{ url: strict.url }] },
      },
      virtualServers: { ws: { members: ['fast', 'strict'] } },
    },
    { dir },
  )
  // The first list teaches the virtual server who serves what (and that both speak 2026-07-28).
  const list = await mcpPost(gw.mcpUrl('ws'), 'tools/list', {}, { id: 1 })
  const names = (list.response().result?.['tools'] as { name: string }[]).map((t) => t.name)
  expect(names.sort()).toEqual(['echo', 'lookup'])
  return { fast, strict, gw }
}

const ENVELOPE = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}'

describe('tools/call to a member that trusts headers', () => {
  it('is forwarded byte for byte on its Mcp-Name; a denied name is refused with nothing forwarded', async () => {
    const { fast, gw } = await setup()
    // The largest id a JavaScript member echoes exactly: a larger one comes back rounded, and
    // that answer is refused as another request's (docs/security.md "What the gateway relays").
    const text = `{ "jsonrpc":"2.0", "id":9007199254740991, "method":"tools/call", "params":{"name":"echo","arguments":{"n":1.50},${ENVELOPE}}}`
    const call = await rawPost(gw.mcpUrl('ws'), text, mcpHeaders('tools/call', 'echo'))
    expect(call.status).toBe(200)
    const forwarded = fast.calls('tools/call')
    expect(forwarded).toHaveLength(1)
    expect(forwarded[0]?.body.toString('utf8')).toBe(text)
    expect(forwarded[0]?.header('mcp-name')).toBe('echo')
    // The member's policy decides on the header's name, as on its own endpoint.
    const denied = `{"jsonrpc":"2.0","id":12345678901234567891,"method":"tools/call","params":{"name":"delete_repo",${ENVELOPE}}}`
    const res = await rawPost(gw.mcpUrl('ws'), denied, mcpHeaders('tools/call', 'delete_repo'))
    expect(res.status).toBe(200)
    expect(res.text).toBe(
      '{"jsonrpc":"2.0","id":12345678901234567891,"error":{"code":-32602,"message":"Unknown tool: delete_repo"}}',
    )
    expect(fast.calls('tools/call')).toHaveLength(1)
    // What the member checks itself (the body's name against Mcp-Name) is left to it on both
    // endpoints alike: the same request gets the same treatment through either.
    const odd = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"other",${ENVELOPE}}}`
    const own = await rawPost(gw.mcpUrl('fast'), odd, mcpHeaders('tools/call', 'echo'))
    const via = await rawPost(gw.mcpUrl('ws'), odd, mcpHeaders('tools/call', 'echo'))
    expect([via.status, via.text]).toEqual([own.status, own.text])
    const seen = fast.calls('tools/call').map((r) => r.body.toString('utf8'))
    expect(seen.slice(1)).toEqual([odd, odd])
  })

  it('still parses and checks what goes to a member that does not trust headers', async () => {
    const { strict, gw } = await setup()
    const before = strict.requests.length
    // Mcp-Name names one tool, the body another: refused before any member is asked.
    const res = await rawPost(
      gw.mcpUrl('ws'),
      `{"jsonrpc":"2.0","id":"m-1","method":"tools/call","params":{"name":"delete_everything",${ENVELOPE}}}`,
      mcpHeaders('tools/call', 'lookup'),
    )
    expect(res.status).toBe(400)
    expect(res.json()).toMatchObject({
      id: 'm-1',
      error: { code: -32020, data: { reason: 'header_mismatch' } },
    })
    expect(strict.requests.length).toBe(before)
    const ok = await mcpPost(gw.mcpUrl('ws'), 'tools/call', { name: 'lookup' }, { id: 'm-2' })
    expect(ok.status).toBe(200)
    expect(strict.calls('tools/call')).toHaveLength(1)
    // A notification the front did not parse is still accepted, and reaches no member.
    const note = await rawPost(
      gw.mcpUrl('ws'),
      `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,${ENVELOPE}}}`,
      mcpHeaders('notifications/cancelled'),
    )
    expect(note.status).toBe(202)
  })
})
