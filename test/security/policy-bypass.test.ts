import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  encodeHeaderValue,
  mcpBody,
  mcpHeaders,
  rawPost,
  type RawResponse,
} from '../helpers/clients.js'
import { oneServer, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startNonValidatingBackend, type NonValidatingBackend } from '../helpers/sdk-servers.js'

/**
 * Allowlist bypass attempts (reliability A.5, A.6) against a backend that checks nothing: it runs
 * whatever params.name says. Every attempt must be refused or denied with nothing forwarded.
 */

const POLICY = `
rules:
  - name: safe
    servers: [app]
    allow:
      tools: [search, echo]
      prompts: [summarize]
      resources: ["docs://readme"]
  - name: no-deletes
    servers: ["*"]
    deny:
      tools: ["delete_*"]
`

async function setup(server: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  const backend: NonValidatingBackend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-bypass-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), POLICY)
  const gw: TestGateway = await startTestGateway(
    { ...oneServer(backend.url, server), policies: '.', ...extra },
    { dir },
  )
  return { backend, url: gw.mcpUrl('app'), gw }
}

function rpcError(res: RawResponse): { code: number; message: string } | undefined {
  return (res.json() as { error?: { code: number; message: string } }).error
}

function expectUnknownTool(res: RawResponse, name: string): void {
  expect(res.status, res.text).toBe(200)
  expect(rpcError(res)).toEqual({ code: -32602, message: `Unknown tool: ${name}` })
}

const LEGACY_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-06-18',
}
const legacyCall = (name: string) => ({
  jsonrpc: '2.0',
  id: 3,
  method: 'tools/call',
  params: { name, arguments: {} },
})

describe('policy bypass attempts against a backend that does not check headers', () => {
  it('A-55: Mcp-Name names an allowed tool, the body calls a denied one → 400 -32020, nothing forwarded', async () => {
    const { backend, url } = await setup()
    const res = await rawPost(
      url,
      mcpBody('tools/call', { name: 'delete_repo', arguments: {} }),
      mcpHeaders('tools/call', 'search'),
    )
    expect(res.status).toBe(400)
    expect(rpcError(res)?.code).toBe(-32020)
    expect(backend.requests).toHaveLength(0)
  })

  it('A-54: Mcp-Method says tools/list, the body calls a denied tool → 400 -32020, nothing forwarded', async () => {
    const { backend, url } = await setup()
    const res = await rawPost(
      url,
      mcpBody('tools/call', { name: 'delete_repo', arguments: {} }),
      mcpHeaders('tools/list'),
    )
    expect(res.status).toBe(400)
    expect(rpcError(res)?.code).toBe(-32020)
    expect(backend.requests).toHaveLength(0)
  })

  it('A-58: a base64-sentinel Mcp-Name is decoded before the decision', async () => {
    const { backend, url, gw } = await setup()
    const sentinel = `=?base64?${Buffer.from('delete_repo').toString('base64')}?=`
    const denied = await rawPost(
      url,
      mcpBody('tools/call', { name: 'delete_repo', arguments: {} }),
      {
        ...mcpHeaders('tools/call'),
        'mcp-name': sentinel,
      },
    )
    expectUnknownTool(denied, 'delete_repo')
    // the raw sentinel text is never what policy judges
    expect(gw.logs.filter((l) => l.audit === true).map((l) => l.target)).toEqual(['delete_repo'])
    const mismatch = await rawPost(url, mcpBody('tools/call', { name: 'search', arguments: {} }), {
      ...mcpHeaders('tools/call'),
      'mcp-name': sentinel,
    })
    expect(mismatch.status).toBe(400)
    expect(rpcError(mismatch)?.code).toBe(-32020)
    expect(backend.requests).toHaveLength(0)
  })

  it('A-72: duplicate name keys are refused before any decision', async () => {
    const { backend, url } = await setup()
    const body = JSON.stringify(mcpBody('tools/call', { name: 'search', arguments: {} })).replace(
      '"name":"search"',
      '"name":"delete_repo","name":"search"',
    )
    const res = await rawPost(url, body, mcpHeaders('tools/call', 'search'))
    expect(res.status).toBe(400)
    expect(rpcError(res)?.code).toBe(-32600)
    expect(backend.requests).toHaveLength(0)
  })

  it.each(['Search', 'SEARCH', 'search ', 'ｓearch', 'search\u200b', 'Echo'])(
    'A-70: the variant %j of an allowed name is denied (exact match, no normalisation)',
    async (name) => {
      const { backend, url } = await setup()
      const res = await rawPost(
        url,
        mcpBody('tools/call', { name, arguments: {} }),
        mcpHeaders('tools/call', name),
      )
      expectUnknownTool(res, name)
      expect(backend.requests).toHaveLength(0)
    },
  )

  it('A-65: a 2025-era request without routing headers is judged on its body', async () => {
    const { backend, url } = await setup()
    expectUnknownTool(await rawPost(url, legacyCall('delete_repo'), LEGACY_HEADERS), 'delete_repo')
    expect(backend.requests).toHaveLength(0)
    const ok = await rawPost(url, legacyCall('search'), LEGACY_HEADERS)
    expect(ok.status).toBe(200)
    expect(backend.calls('tools/call')).toHaveLength(1)
  })

  it('a 2025-era resources/subscribe of a denied URI is denied', async () => {
    const { backend, url } = await setup()
    const res = await rawPost(
      url,
      { jsonrpc: '2.0', id: 4, method: 'resources/subscribe', params: { uri: 'docs://secret' } },
      LEGACY_HEADERS,
    )
    expect(res.status).toBe(200)
    expect(res.json()).toEqual({
      jsonrpc: '2.0',
      id: 4,
      error: {
        code: -32602,
        message: 'Resource not found: docs://secret',
        data: { uri: 'docs://secret' },
      },
    })
    expect(backend.requests).toHaveLength(0)
  })

  it('a denied tools/call sent as a notification gets 202 and is not forwarded', async () => {
    const { backend, url } = await setup()
    const { id: _id, ...note } = mcpBody('tools/call', { name: 'delete_repo', arguments: {} })
    const res = await rawPost(url, note, mcpHeaders('tools/call', 'delete_repo'))
    expect(res.status).toBe(202)
    expect(res.text).toBe('')
    expect(backend.requests).toHaveLength(0)
  })

  it('A-76: completion refs and listen URIs are read from the body even for a backend trusted with headers', async () => {
    const { backend, url } = await setup({ trustHeaders: true })
    const complete = await rawPost(
      url,
      mcpBody('completion/complete', {
        ref: { type: 'ref/prompt', name: 'review' },
        argument: { name: 'a', value: 'b' },
      }),
      mcpHeaders('completion/complete'),
    )
    expect(complete.json()).toMatchObject({
      error: { code: -32602, message: 'Unknown prompt: review' },
    })
    const listen = await rawPost(
      url,
      mcpBody('subscriptions/listen', {
        notifications: { resourceSubscriptions: ['docs://readme', 'file:///etc/shadow'] },
      }),
      mcpHeaders('subscriptions/listen'),
    )
    expect(listen.json()).toMatchObject({
      error: { code: -32602, message: 'Resource not found: file:///etc/shadow' },
    })
    // 2026-07-28 has no resources/subscribe: answered as an unknown method; a 2025 one is judged.
    const modernSubscribe = await rawPost(
      url,
      mcpBody('resources/subscribe', { uri: 'file:///etc/shadow' }),
      mcpHeaders('resources/subscribe'),
    )
    expect(modernSubscribe.status).toBe(404)
    expect(modernSubscribe.json()).toMatchObject({
      error: { code: -32601, message: 'Method not found' },
    })
    const subscribe = await rawPost(
      url,
      {
        jsonrpc: '2.0',
        id: 2,
        method: 'resources/subscribe',
        params: { uri: 'file:///etc/shadow' },
      },
      LEGACY_HEADERS,
    )
    expect(subscribe.json()).toMatchObject({
      error: { code: -32602, message: 'Resource not found: file:///etc/shadow' },
    })
    expect(backend.requests).toHaveLength(0)
  })

  it('A-79: a tool hidden from tools/list is also refused when called directly', async () => {
    const { backend, url } = await setup()
    const list = await rawPost(url, mcpBody('tools/list'), mcpHeaders('tools/list'))
    const tools = (list.response().result as { tools: { name: string }[] }).tools.map((t) => t.name)
    expect(tools).toEqual(['echo', 'search'])
    expectUnknownTool(
      await rawPost(
        url,
        mcpBody('tools/call', { name: 'delete_repo', arguments: {} }),
        mcpHeaders('tools/call', 'delete_repo'),
      ),
      'delete_repo',
    )
    expect(backend.calls('tools/call')).toHaveLength(0)
  })

  it('a denied non-ASCII name arrives encoded and is denied on its decoded value', async () => {
    const { backend, url } = await setup()
    const name = 'délete_repo'
    const res = await rawPost(url, mcpBody('tools/call', { name, arguments: {} }), {
      ...mcpHeaders('tools/call'),
      'mcp-name': encodeHeaderValue(name),
    })
    expectUnknownTool(res, name)
    expect(backend.requests).toHaveLength(0)
  })

  it('dry run forwards a would-be denial and audits it', async () => {
    const { backend, url, gw } = await setup({}, { policyMode: 'dry-run' })
    const res = await rawPost(
      url,
      mcpBody('tools/call', { name: 'delete_repo', arguments: {} }),
      mcpHeaders('tools/call', 'delete_repo'),
    )
    expect(res.status).toBe(200)
    expect(res.json()).toMatchObject({ result: { content: [{ text: 'ran delete_repo' }] } })
    expect(backend.calls('tools/call')).toHaveLength(1)
    expect(gw.logs.find((l) => l.audit === true)).toMatchObject({
      target: 'delete_repo',
      decision: 'deny',
      dryRun: true,
      rule: 'no-deletes',
    })
  })
})
