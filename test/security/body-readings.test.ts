import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  encodeHeaderValue,
  envelope,
  mcpBody,
  mcpHeaders,
  rawPost,
  type RawResponse,
} from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { startNonValidatingBackend, type NonValidatingBackend } from '../helpers/sdk-servers.js'

/**
 * Keys and values that another reader decodes differently from the gateway (docs/policy.md
 * §Names, ids and encodings): each is refused before any decision, against a backend that checks
 * nothing and runs whatever it reads, so a refusal is only a pass when that backend saw nothing.
 */

const POLICY = `
rules:
  - name: safe
    servers: [app]
    allow:
      tools: [search]
      prompts: [summarize]
      resources: ["file:///projects/app/*", "docs://*"]
      methods: ["x-vendor/status"]
  - name: no-deletes
    servers: ["*"]
    deny:
      tools: ["delete_*"]
      prompts: ["secret*"]
`

async function setup(server: Record<string, unknown> = {}) {
  const backend: NonValidatingBackend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-readings-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), POLICY)
  const gw = await startTestGateway({ ...oneServer(backend.url, server), policies: '.' }, { dir })
  return { backend, url: gw.mcpUrl('app'), gw }
}

interface RpcError {
  readonly code: number
  readonly message: string
  readonly data?: { readonly source?: string; readonly reason?: string }
}

/** The status, JSON-RPC code, reason and raw id text of a refusal. */
function refusal(res: RawResponse): {
  status: number
  code: number
  reason: string | undefined
  id: string
} {
  const parsed = res.json() as { error: RpcError }
  const id = /^\{"jsonrpc":"2\.0","id":(.*?),"error":/.exec(res.text)?.[1] ?? '(none)'
  return { status: res.status, code: parsed.error.code, reason: parsed.error.data?.reason, id }
}

/** POSTs raw bytes (undici sends a Buffer as is). */
async function postBytes(
  url: string,
  body: Buffer,
  headers: Record<string, string>,
): Promise<RawResponse> {
  const res = await request(url, { method: 'POST', body, headers })
  const text = await res.body.text()
  return {
    status: res.statusCode,
    headers: res.headers,
    text,
    truncated: false,
    json: () => JSON.parse(text) as unknown,
    messages: () => [],
    response: () => JSON.parse(text) as never,
  }
}

const LEGACY = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
}

/** A modern request body as text, with `{env}` replaced by the 2026-07-28 envelope. */
function modernText(text: string): string {
  return text.replace('{env}', JSON.stringify(envelope()))
}

describe('case-variant keys at the positions the gateway reads', () => {
  it.each([
    [
      'params.Ref naming a denied prompt (completion/complete)',
      'completion/complete',
      undefined,
      '{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"Ref":{"type":"ref/prompt","name":"secret_plan"},"argument":{"name":"a","value":""},"_meta":{env}}}',
    ],
    [
      'params.ref.Name next to an allowed name',
      'completion/complete',
      undefined,
      '{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"summarize","Name":"secret_plan"},"argument":{"name":"a","value":""},"_meta":{env}}}',
    ],
    [
      'params.Name next to an allowed tool',
      'tools/call',
      'search',
      '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","Name":"delete_repo","arguments":{},"_meta":{env}}}',
    ],
    [
      'Params instead of params',
      'tools/call',
      'search',
      '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{},"_meta":{env}},"Params":{"name":"delete_repo"}}',
    ],
    [
      'METHOD next to method',
      'tools/list',
      undefined,
      '{"jsonrpc":"2.0","id":7,"method":"tools/list","METHOD":"tools/call","params":{"_meta":{env}}}',
    ],
    [
      'params.URI next to an allowed uri',
      'resources/read',
      'docs://readme',
      '{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"docs://readme","URI":"file:///etc/passwd","_meta":{env}}}',
    ],
    [
      'ResourceSubscriptions in a listen filter',
      'subscriptions/listen',
      undefined,
      '{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"ResourceSubscriptions":["file:///etc/shadow"]},"_meta":{env}}}',
    ],
    [
      'a Go-folded key (long s in paramſ)',
      'tools/call',
      'search',
      '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{},"_meta":{env}},"paramſ":{"name":"delete_repo"}}',
    ],
  ])('%s → 400 case_variant_key, nothing forwarded', async (_label, method, name, text) => {
    const { backend, url } = await setup()
    const res = await rawPost(url, modernText(text), mcpHeaders(method, name))
    expect(refusal(res)).toEqual({ status: 400, code: -32600, reason: 'case_variant_key', id: '7' })
    expect(res.headers['x-mcp-gateway-error']).toBe('case_variant_key')
    expect(backend.requests).toHaveLength(0)
  })

  it('a 2025-era body with params.Name alone → 400 case_variant_key, nothing forwarded', async () => {
    const { backend, url } = await setup()
    const body =
      '{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"Name":"delete_repo","arguments":{}}}'
    expect(refusal(await rawPost(url, body, LEGACY))).toEqual({
      status: 400,
      code: -32600,
      reason: 'case_variant_key',
      id: '"a"',
    })
    expect(backend.requests).toHaveLength(0)
  })

  it('__proto__ near the root → 400 prototype_key (not duplicate_key), nothing forwarded', async () => {
    const { backend, url } = await setup()
    const text = modernText(
      '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"search","__proto__":{"name":"delete_repo"},"arguments":{},"_meta":{env}}}',
    )
    expect(refusal(await rawPost(url, text, mcpHeaders('tools/call', 'search')))).toEqual({
      status: 400,
      code: -32600,
      reason: 'prototype_key',
      id: '8',
    })
    expect(backend.requests).toHaveLength(0)
  })

  it('keys inside arguments are user data: case variants there are forwarded untouched', async () => {
    const { backend, url } = await setup()
    const text = modernText(
      '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"search","arguments":{"Name":"a","name":"b","URI":"c"},"_meta":{env}}}',
    )
    const res = await rawPost(url, text, mcpHeaders('tools/call', 'search'))
    expect(res.status).toBe(200)
    expect(backend.calls('tools/call')).toHaveLength(1)
    expect(backend.requests[0]?.body.toString()).toBe(text)
  })
})

describe('tool and prompt names another reader shows or decodes differently', () => {
  it.each([
    ['NUL', 'search\\u0000'],
    ['ESC (C0)', 'search\\u001b'],
    ['DEL', 'search\\u007f'],
    ['NEL (C1)', 'search\\u0085'],
    ['a lone surrogate', 'search\\ud800'],
    ['right-to-left override', 'search\\u202e'],
    ['a directional isolate', '\\u2067search'],
    ['a right-to-left mark', 'search\\u200f'],
  ])('a tools/call name with %s → 400 invalid_name, nothing forwarded', async (_label, escaped) => {
    const { backend, url } = await setup()
    const body = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"${escaped}","arguments":{}}}`
    expect(refusal(await rawPost(url, body, LEGACY))).toEqual({
      status: 400,
      code: -32602,
      reason: 'invalid_name',
      id: '3',
    })
    expect(backend.requests).toHaveLength(0)
  })

  it('prompts/get and a completion ref are checked the same way', async () => {
    const { backend, url } = await setup()
    const get =
      '{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"summarize\\u202e"}}'
    expect(refusal(await rawPost(url, get, LEGACY))).toEqual({
      status: 400,
      code: -32602,
      reason: 'invalid_name',
      id: '4',
    })
    const ref =
      '{"jsonrpc":"2.0","id":5,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"summarize\\u0000"},"argument":{"name":"a","value":""}}}'
    expect(refusal(await rawPost(url, ref, LEGACY))).toEqual({
      status: 400,
      code: -32602,
      reason: 'invalid_name',
      id: '5',
    })
    expect(backend.requests).toHaveLength(0)
  })

  it('a decoded Mcp-Name of a trusted backend is checked before it is judged', async () => {
    const { backend, url } = await setup({ trustHeaders: true })
    const name = 'search\u202e'
    const res = await rawPost(
      url,
      mcpBody('tools/call', { name, arguments: {} }, 6),
      mcpHeaders('tools/call', name),
    )
    expect(refusal(res)).toEqual({ status: 400, code: -32602, reason: 'invalid_name', id: '6' })
    expect(backend.requests).toHaveLength(0)
  })
})

describe('bodies in another encoding', () => {
  const json =
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repo","arguments":{}}}'
  it.each([
    [
      'a UTF-8 byte order mark',
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]),
      'byte order mark',
    ],
    ['UTF-16LE with a byte order mark', Buffer.from(`\ufeff${json}`, 'utf16le'), 'UTF-16'],
    ['UTF-16LE without one', Buffer.from(json, 'utf16le'), 'UTF-16'],
    ['UTF-16BE without one', Buffer.from(json, 'utf16le').swap16(), 'UTF-16'],
    [
      'invalid UTF-8',
      Buffer.from(json.replace('delete_repo', 'search\udfff')).fill(0xff, 60, 61),
      'not valid UTF-8',
    ],
  ])('%s → 400 -32700 parse_error saying why, nothing forwarded', async (_label, bytes, why) => {
    const { backend, url } = await setup()
    const res = await postBytes(url, bytes, LEGACY)
    expect(refusal(res)).toMatchObject({ status: 400, code: -32700, reason: 'parse_error' })
    expect((res.json() as { error: RpcError }).error.message).toContain(why)
    expect(backend.requests).toHaveLength(0)
  })

  it('a trusted backend gets no BOM, UTF-16 or batch body either, though its bodies are not parsed', async () => {
    const { backend, url } = await setup({ trustHeaders: true })
    const modern = JSON.stringify(mcpBody('tools/call', { name: 'search', arguments: {} }))
    const headers = mcpHeaders('tools/call', 'search')
    const bom = await postBytes(url, Buffer.from(`\ufeff${modern}`), headers)
    expect(refusal(bom)).toMatchObject({ status: 400, code: -32700, reason: 'parse_error' })
    const utf16 = await postBytes(
      url,
      Buffer.from(`\ufeff[${modern}]`, 'utf16le').swap16(),
      headers,
    )
    expect(refusal(utf16)).toMatchObject({ status: 400, code: -32700, reason: 'parse_error' })
    const batch = await rawPost(url, `[${modern}]`, headers)
    expect(refusal(batch)).toMatchObject({
      status: 400,
      code: -32600,
      reason: 'batch_not_supported',
    })
    expect(backend.requests).toHaveLength(0)
  })

  it('a charset other than UTF-8 → 400 -32700, nothing forwarded', async () => {
    const { backend, url } = await setup()
    const res = await rawPost(url, json, {
      ...LEGACY,
      'content-type': 'application/json; charset=utf-16',
    })
    expect(refusal(res)).toEqual({ status: 400, code: -32700, reason: 'parse_error', id: '1' })
    expect(backend.requests).toHaveLength(0)
  })
})

describe('JSON-RPC ids', () => {
  it.each(['1.5', '1e400', '1E2', '-0', 'true', '{"a":1}', '[1]', 'null'])(
    'id %s → 400 -32600 invalid_id with a null id, nothing forwarded',
    async (id) => {
      const { backend, url } = await setup()
      const body = `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"search","arguments":{}}}`
      expect(refusal(await rawPost(url, body, LEGACY))).toEqual({
        status: 400,
        code: -32600,
        reason: 'invalid_id',
        id: 'null',
      })
      expect(backend.requests).toHaveLength(0)
    },
  )

  it('a big integer id is forwarded and its denial echoes it byte for byte', async () => {
    const { backend, url } = await setup()
    const denied =
      '{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"name":"delete_repo","arguments":{}}}'
    const res = await rawPost(url, denied, LEGACY)
    expect(res.text).toBe(
      '{"jsonrpc":"2.0","id":123456789012345678901234567890,"error":{"code":-32602,"message":"Unknown tool: delete_repo"}}',
    )
    expect(backend.requests).toHaveLength(0)
    const allowed = denied.replace('delete_repo', 'search')
    // The SDK backend answers with the nearest double (1.2345678901234568e+29): not this request's
    // id, so the answer is refused (JSON-RPC 2.0 §5), but the backend got the body byte for byte.
    const answered = await rawPost(url, allowed, LEGACY)
    expect(answered.status).toBe(502)
    expect(answered.text).toContain('"id":123456789012345678901234567890,')
    expect(answered.text).toContain('"reason":"upstream_id_mismatch"')
    expect(backend.requests[0]?.body.toString()).toBe(allowed)
  })
})

describe('resource URIs must be in normal form when policies are on', () => {
  const traversal = 'file:///projects/app/../../etc/passwd'

  it.each([
    traversal,
    'file:///projects/app/%2e%2e/%2E%2E/etc/passwd',
    'file:///projects/app/..%2fsecret',
    'file:///projects/app/..\\..\\etc\\passwd',
    'file:///projects/app/./x',
  ])(
    'resources/read %s never matches file:///projects/app/* → 400 uri_not_normalized',
    async (uri) => {
      const { backend, url } = await setup()
      const res = await rawPost(
        url,
        mcpBody('resources/read', { uri }, 11),
        mcpHeaders('resources/read', uri),
      )
      expect(refusal(res)).toEqual({
        status: 400,
        code: -32602,
        reason: 'uri_not_normalized',
        id: '11',
      })
      expect(backend.requests).toHaveLength(0)
    },
  )

  it('the same holds for completion refs, listen filters and 2025 subscribes', async () => {
    const { backend, url } = await setup()
    const complete = mcpBody(
      'completion/complete',
      { ref: { type: 'ref/resource', uri: traversal }, argument: { name: 'a', value: '' } },
      12,
    )
    expect(refusal(await rawPost(url, complete, mcpHeaders('completion/complete')))).toEqual({
      status: 400,
      code: -32602,
      reason: 'uri_not_normalized',
      id: '12',
    })
    const listen = mcpBody(
      'subscriptions/listen',
      { notifications: { resourceSubscriptions: ['docs://a', traversal] } },
      'listen:0',
    )
    expect(refusal(await rawPost(url, listen, mcpHeaders('subscriptions/listen')))).toEqual({
      status: 400,
      code: -32602,
      reason: 'uri_not_normalized',
      id: '"listen:0"',
    })
    const subscribe = {
      jsonrpc: '2.0',
      id: 13,
      method: 'resources/subscribe',
      params: { uri: traversal },
    }
    expect(refusal(await rawPost(url, subscribe, LEGACY))).toEqual({
      status: 400,
      code: -32602,
      reason: 'uri_not_normalized',
      id: '13',
    })
    expect(backend.requests).toHaveLength(0)
  })

  it('a trusted backend: the Mcp-Name of resources/read is checked without reading the body', async () => {
    const { backend, url } = await setup({ trustHeaders: true })
    const res = await rawPost(url, 'not even JSON', mcpHeaders('resources/read', traversal))
    expect(refusal(res)).toEqual({
      status: 400,
      code: -32602,
      reason: 'uri_not_normalized',
      id: 'null',
    })
    expect(backend.requests).toHaveLength(0)
  })

  it('a URI in normal form under the allowed prefix is read', async () => {
    const { backend, url } = await setup()
    const uri = 'file:///projects/app/README.md'
    expect(
      (await rawPost(url, mcpBody('resources/read', { uri }), mcpHeaders('resources/read', uri)))
        .status,
    ).toBe(200)
    expect(backend.calls('resources/read')).toHaveLength(1)
  })
})

describe('only methods the gateway knows are forwarded when policies are on', () => {
  const notFound = (id: string) =>
    `{"jsonrpc":"2.0","id":${id},"error":{"code":-32601,"message":"Method not found"}}`

  it.each([
    'TOOLS/CALL',
    'tools//call',
    'Tools/Call',
    'x-vendor/exec',
    'initialize',
    'ping',
    'resources/subscribe',
  ])(
    '2026-07-28 %s → 404 -32601 like a server that does not know it, nothing forwarded',
    async (method) => {
      const { backend, url } = await setup()
      const res = await rawPost(
        url,
        mcpBody(method, { name: 'delete_repo', arguments: {} }, 21),
        mcpHeaders(method),
      )
      expect(res.status).toBe(404)
      expect(res.text).toBe(notFound('21'))
      expect(res.headers['x-mcp-gateway-error']).toBeUndefined()
      expect(backend.requests).toHaveLength(0)
    },
  )

  it.each(['TOOLS/CALL', 'x-vendor/exec', 'server/discover', 'subscriptions/listen'])(
    '2025-era %s → 200 -32601 in band, nothing forwarded',
    async (method) => {
      const { backend, url } = await setup()
      const res = await rawPost(
        url,
        { jsonrpc: '2.0', id: 'q', method, params: { name: 'delete_repo' } },
        LEGACY,
      )
      expect(res.status).toBe(200)
      expect(res.text).toBe(notFound('"q"'))
      expect(backend.requests).toHaveLength(0)
    },
  )

  it('a notification with an unknown method → 202, nothing forwarded', async () => {
    const { backend, url } = await setup()
    const modern = {
      jsonrpc: '2.0',
      method: 'notifications/Cancelled',
      params: { _meta: envelope() },
    }
    const res = await rawPost(url, modern, {
      'content-type': 'application/json',
      'mcp-protocol-version': '2026-07-28',
    })
    expect(res.status).toBe(202)
    expect(res.text).toBe('')
    const legacy = await rawPost(url, { jsonrpc: '2.0', method: 'x-vendor/poke' }, LEGACY)
    expect(legacy.status).toBe(202)
    expect(backend.requests).toHaveLength(0)
  })

  it('a trusted backend: the Mcp-Method header is checked without reading the body', async () => {
    const { backend, url } = await setup({ trustHeaders: true })
    const res = await rawPost(
      url,
      mcpBody('tools/call', { name: 'delete_repo' }, 22),
      mcpHeaders('TOOLS/CALL'),
    )
    expect(res.status).toBe(404)
    expect(res.text).toBe(notFound('22'))
    expect(backend.requests).toHaveLength(0)
  })

  it('extraMethods: a listed method is a policy target, denied unless a rule allows it', async () => {
    const { backend, url, gw } = await setup({ extraMethods: ['x-vendor/*'] })
    const denied = await rawPost(url, mcpBody('x-vendor/exec', {}, 23), mcpHeaders('x-vendor/exec'))
    expect(denied.status).toBe(404)
    expect(denied.text).toBe(notFound('23'))
    expect(backend.requests).toHaveLength(0)
    const audit = gw.logs.filter((l) => l.audit === true)
    expect(audit.map((l) => [l.kind, l.target, l.decision])).toEqual([
      ['method', 'x-vendor/exec', 'deny'],
    ])
    const allowed = await rawPost(
      url,
      mcpBody('x-vendor/status', {}, 24),
      mcpHeaders('x-vendor/status'),
    )
    expect(allowed.status).toBe(200)
    expect(backend.calls('x-vendor/status')).toHaveLength(1)
  })

  it('extraMethods: ["*"] still never admits a look-alike of a protocol method', async () => {
    const { backend, url } = await setup({ extraMethods: ['*'] })
    for (const method of ['TOOLS/CALL', 'tools//call', 'Tools.Call']) {
      const res = await rawPost(
        url,
        mcpBody(method, { name: 'delete_repo' }, 25),
        mcpHeaders(method),
      )
      expect(res.status, method).toBe(404)
    }
    expect(backend.requests).toHaveLength(0)
  })
})

describe('normal traffic is unchanged', () => {
  it('an allowed call with a sentinel-encoded non-ASCII name still goes through', async () => {
    const { backend, url } = await setup()
    const res = await rawPost(
      url,
      mcpBody('tools/call', { name: 'search', arguments: { q: 'Zürich ☃' } }),
      {
        ...mcpHeaders('tools/call'),
        'mcp-name': encodeHeaderValue('search'),
      },
    )
    expect(res.status).toBe(200)
    expect(backend.calls('tools/call')).toHaveLength(1)
  })
})
