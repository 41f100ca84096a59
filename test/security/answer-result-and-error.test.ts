import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { envelope, rawPost, type RawResponse } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { startReplica, type Fault, type ReceivedCall } from '../helpers/replicas.js'

/**
 * A JSON-RPC 2.0 response has exactly one of `result` and `error` (§5: either MUST NOT exist when
 * the other does). An answer with both, or with one written twice, reads as a success to one
 * client and as a failure to another (a client testing `error` first, one testing `result`
 * first, first-key-wins and last-key-wins readers), so it is no answer: a 502
 * `upstream_unreadable` with the request's id, in band on a stream that is already open, on every
 * path (docs/security.md "What the gateway relays"). A mock backend, since a real SDK server
 * cannot produce this fault.
 */

const BOTH: readonly [string, (id: string) => string][] = [
  [
    'a result and an error',
    (id) =>
      `{"jsonrpc":"2.0","id":${id},"result":{"content":[{"type":"text","text":"PAID"}]},"error":{"code":-32603,"message":"failed"}}`,
  ],
  [
    'an error, then a result',
    (id) =>
      `{"jsonrpc":"2.0","error":{"code":-32603,"message":"failed"},"id":${id},"result":{"content":[{"type":"text","text":"PAID"}]}}`,
  ],
  [
    'a result next to "error": null (JSON-RPC 1.0 style)',
    (id) =>
      `{"jsonrpc":"2.0","id":${id},"result":{"content":[{"type":"text","text":"PAID"}]},"error":null}`,
  ],
  [
    'a result written twice',
    (id) =>
      `{"jsonrpc":"2.0","id":${id},"result":{"content":[{"type":"text","text":"PAID"}]},"result":{"content":[]}}`,
  ],
  [
    'an error written twice',
    (id) =>
      `{"jsonrpc":"2.0","id":${id},"error":{"code":1,"message":"PAID"},"error":{"code":2,"message":"x"}}`,
  ],
]

const ERAS = [
  {
    era: '2026-07-28',
    headers: (method: string, name?: string) => ({
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
      ...(name !== undefined && { 'mcp-name': name }),
    }),
    params: (p: Record<string, unknown>) => ({ ...p, _meta: envelope() }),
  },
  {
    era: '2025-11-25',
    headers: (_method: string) => ({
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
    }),
    params: (p: Record<string, unknown>) => p,
  },
] as const

const LIST = (id: string): string =>
  `{"jsonrpc":"2.0","id":${id},"result":{"tools":[{"name":"pay","inputSchema":{"type":"object"}}]}}`

type Shape = 'json' | 'sse' | 'json-500'

/** A member that lists `pay` and answers its calls with `body`, as JSON, SSE or a held 5xx. */
function faultFor(body: (id: string) => string, shape: Shape): (call: ReceivedCall) => Fault {
  return (call) => {
    if (call.method === 'server/discover') return 'ok'
    if (call.method === 'tools/list') {
      return { status: 200, contentType: 'application/json', body: LIST(call.id) }
    }
    if (shape === 'sse') {
      const progress =
        'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n'
      return { sse: [progress, `event: message\ndata: ${body(call.id)}\n\n`], end: true }
    }
    const status = shape === 'json-500' ? 500 : 200
    return { status, contentType: 'application/json', body: body(call.id) }
  }
}

function policyDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-both-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(
    join(dir, 'main.yaml'),
    'rules:\n  - { name: pay, servers: [app], allow: { tools: [pay] } }\n',
  )
  return dir
}

/** The gateway's own 502: status (200 on a stream already open), code, reason, the request id. */
function expectRefused(res: RawResponse, status: number, id: unknown): void {
  expect(res.status, res.text).toBe(status)
  expect(res.text).not.toContain('PAID')
  const answers = res.messages().filter((m) => 'result' in m || 'error' in m)
  expect(answers).toHaveLength(1)
  const msg = res.response()
  expect(msg.id).toEqual(id)
  expect(msg.result).toBeUndefined()
  expect(msg.error?.code).toBe(-31502)
  expect(msg.error?.data).toMatchObject({ source: 'gateway', reason: 'upstream_unreadable' })
  if (status !== 200) expect(res.headers['x-mcp-gateway-error']).toBe('upstream_unreadable')
}

describe.each(ERAS)('an answer with both result and error, $era client', (e) => {
  const call = (url: string, id: string | number) =>
    rawPost(
      url,
      {
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: e.params({ name: 'pay', arguments: {} }),
      },
      e.headers('tools/call', 'pay'),
    )

  describe.each(BOTH)('%s', (_, body) => {
    it.each([
      ['JSON, passed through', 'json', false, 502],
      ['JSON, read by a policy', 'json', true, 502],
      ['a held 5xx JSON-RPC body', 'json-500', false, 502],
      ['an SSE response event, passed through', 'sse', false, 200],
      ['an SSE response event, read by a policy', 'sse', true, 200],
    ] as const)(
      '%s → 502 upstream_unreadable, never relayed',
      async (_how, shape, policies, status) => {
        const member = await startReplica('app', faultFor(body, shape))
        const gw = await startTestGateway(
          {
            servers: { app: { upstreams: [{ url: member.url }], trustHeaders: false } },
            ...(policies && { policies: '.' }),
          },
          policies ? { dir: policyDir() } : {},
        )
        expectRefused(await call(gw.mcpUrl('app'), 'c-7'), status, 'c-7')
        expect(member.count('tools/call')).toBe(1)
      },
    )
  })
})

describe.each(BOTH)('through a virtual server, a member answering %s', (_, body) => {
  const call = (url: string, id: number) =>
    rawPost(
      url,
      {
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'pay', arguments: {}, _meta: envelope() },
      },
      ERAS[0].headers('tools/call', 'pay'),
    )

  it.each([
    ['JSON', 'json', 502],
    ['SSE', 'sse', 200],
  ] as const)(
    'as %s → 502 upstream_unreadable with the client’s id',
    async (_how, shape, status) => {
      const member = await startReplica('app', faultFor(body, shape))
      const gw = await startTestGateway({
        servers: { app: { upstreams: [{ url: member.url }], trustHeaders: false } },
        virtualServers: { desk: { members: ['app'] } },
      })
      expectRefused(await call(gw.mcpUrl('desk'), 41), status, 41)
      expect(member.count('tools/call')).toBe(1)
    },
  )
})

describe('answers with exactly one of them still pass', () => {
  it.each([
    ['a result', (id: string) => `{"jsonrpc":"2.0","id":${id},"result":{"content":[]}}`],
    [
      'an error',
      (id: string) => `{"jsonrpc":"2.0","id":${id},"error":{"code":-32603,"message":"x"}}`,
    ],
  ])('%s is relayed byte for byte', async (_, body) => {
    const member = await startReplica('app', faultFor(body, 'json'))
    const gw = await startTestGateway({ servers: { app: { upstreams: [{ url: member.url }] } } })
    const res = await rawPost(
      gw.mcpUrl('app'),
      {
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: { name: 'pay', arguments: {}, _meta: envelope() },
      },
      ERAS[0].headers('tools/call', 'pay'),
    )
    expect(res.status).toBe(200)
    expect(res.text).toBe(body('3'))
  })
})
