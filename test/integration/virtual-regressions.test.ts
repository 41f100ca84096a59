import { describe, expect, it } from 'vitest'
import { forecastFor } from '../../deploy/demo/weather-server.js'
import {
  connectClient,
  connectLegacyClient,
  LEGACY_INITIALIZE,
  mcpPost,
  rawPost,
  type RawResponse,
} from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import {
  startFastMcpMember,
  startPagedMember,
  startV1Member,
  type RecordingMember,
} from '../helpers/regression-members.js'
import { SDK_SERVER_TOOLS, startSdkServer } from '../helpers/sdk-servers.js'

/*
 * Regression tests for five failures of virtual servers reported by a user. Each was shown
 * failing on the code before its fix; the comment above it says how it failed.
 */

const KEY = 'a-test-key-of-at-least-16-chars'

describe('1. a fastmcp 4.x member (2025-era only; SSE answers primed with an empty event)', () => {
  async function setup() {
    const fastmcp = await closing(startFastMcpMember())
    const sdk = await closing(startSdkServer({ name: 'sdk' }))
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: {
        fastmcp: { upstreams: [{ url: fastmcp.url }] },
        sdk: { upstreams: [{ url: sdk.url }] },
      },
      virtualServers: { ws: { members: ['fastmcp', 'sdk'] } },
    })
    return { fastmcp, gw }
  }

  function leftOut(gw: TestGateway): unknown[] {
    return gw.logs.filter((l) => String(l.msg).startsWith('virtual server: members left out'))
  }

  // Failed before 1456a23: fastmcp answered every list 400 "server_missing_modern_protocol_support"
  // (the request still carried the 2026-07-28 `_meta` envelope), so it was left out (why: []) and
  // `add` was "Unknown tool".
  it('is listed and called, with progress as it runs, by a 2026-07-28 client', async () => {
    const { fastmcp, gw } = await setup()
    const client = await closing(connectClient(gw.mcpUrl('ws')))
    expect(client.getProtocolEra()).toBe('modern')
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['add', 'get_forecast']))
    const { prompts } = await client.listPrompts()
    expect(prompts.map((p) => p.name)).toContain('greet')
    const progress: unknown[] = []
    const result = await client.callTool(
      { name: 'add', arguments: { a: 2, b: 3 } },
      {
        onprogress: (p) => {
          progress.push(p)
          fastmcp.release() // the tool answers only once its progress has reached the client
        },
      },
    )
    expect(textOf(result)).toBe('5')
    expect(progress).toEqual([expect.objectContaining({ progress: 1, total: 2 })])
    expect(fastmcp.calls).toEqual([{ a: 2, b: 3 }])
    const forecast = await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
    expect(textOf(forecast)).toBe(forecastFor('Oslo'))
    expect(leftOut(gw)).toEqual([])
  })

  // Failed before 1456a23, as above: the gateway added the envelope to a 2025-era client's requests.
  it('is listed and called, with progress as it runs, by a 2025-11-25 client', async () => {
    const { fastmcp, gw } = await setup()
    const client = await closing(connectLegacyClient(gw.mcpUrl('ws')))
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['add', 'get_forecast']))
    const progress: unknown[] = []
    const result = await client.callTool({ name: 'add', arguments: { a: 4, b: 5 } }, undefined, {
      onprogress: (p) => {
        progress.push(p)
        fastmcp.release()
      },
    })
    expect(textOf(result)).toBe('9')
    expect(progress).toEqual([expect.objectContaining({ progress: 1, total: 2 })])
    expect(fastmcp.calls).toEqual([{ a: 4, b: 5 }])
    expect(leftOut(gw)).toEqual([])
  })
})

/**
 * What @modelcontextprotocol/inspector-cli 1.0.3 (SDK v1 1.32 client, Streamable HTTP) sends, byte
 * for byte, as captured in front of the gateway: `initialize`, `notifications/initialized`, then,
 * because the server declared `logging`, `logging/setLevel` (client/connection.js `connect`). Its
 * `initialize` succeeds; the request answered -32601 is the first one after the handshake.
 */
const INSPECTOR = {
  headers: {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'accept-language': '*',
    'sec-fetch-mode': 'cors',
    'user-agent': 'node',
    'accept-encoding': 'gzip, deflate',
  },
  initialize:
    '{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"inspector-cli","version":"1.0.3"}},"jsonrpc":"2.0","id":0}',
  initialized: '{"method":"notifications/initialized","jsonrpc":"2.0"}',
  setLevel: '{"method":"logging/setLevel","params":{"level":"debug"},"jsonrpc":"2.0","id":1}',
} as const

/** inspector-cli's connect, as raw requests: the three answers. */
async function inspectorConnect(url: string) {
  const init = await rawPost(url, INSPECTOR.initialize, INSPECTOR.headers)
  const session = init.headers['mcp-session-id']
  expect(typeof session).toBe('string')
  const after = {
    ...INSPECTOR.headers,
    'mcp-session-id': session as string,
    'mcp-protocol-version': '2025-11-25',
  }
  const initialized = await rawPost(url, INSPECTOR.initialized, after)
  const setLevel = await rawPost(url, INSPECTOR.setLevel, after)
  return { init, initialized, setLevel }
}

describe('2. @modelcontextprotocol/inspector-cli 1.0.3', () => {
  // Failed before the fix: the virtual server declares `logging` (merged from the member) but answers
  // `logging/setLevel` HTTP 404 -32601 "Method not found", which fails the inspector's connect.
  it('connects to a virtual server as it does to the direct endpoint', async () => {
    const logs = await closing(startV1Member({ logging: true }))
    const sdk = await closing(startSdkServer({ name: 'sdk' }))
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: { logs: { upstreams: [{ url: logs.url }] }, sdk: { upstreams: [{ url: sdk.url }] } },
      virtualServers: { ws: { members: ['logs', 'sdk'] } },
    })
    const direct = await inspectorConnect(gw.mcpUrl('logs'))
    expect(direct.init.status).toBe(200)
    expect(direct.initialized.status).toBe(202)
    expect(direct.setLevel.status).toBe(200)
    expect(direct.setLevel.response()).toEqual({ jsonrpc: '2.0', id: 1, result: {} })

    const virtual = await inspectorConnect(gw.mcpUrl('ws'))
    expect(virtual.init.status).toBe(200)
    const caps = (virtual.init.response().result as { capabilities: Record<string, unknown> })
      .capabilities
    expect(virtual.initialized.status).toBe(202)
    // What the virtual server declares it must serve: the inspector sends logging/setLevel only
    // because `logging` was declared, which it is (merged from the member).
    expect(caps).toHaveProperty('logging')
    expect(virtual.setLevel.status).toBe(direct.setLevel.status)
    expect(virtual.setLevel.response()).toEqual(direct.setLevel.response())
    // Accepted at the gateway: only the direct endpoint's setLevel reached the member.
    expect(logs.seen.filter((m) => m.method === 'logging/setLevel')).toHaveLength(1)
    // And the inspector's next step works: tools/list in the same session.
    const list = await rawPost(
      gw.mcpUrl('ws'),
      '{"method":"tools/list","params":{},"jsonrpc":"2.0","id":2}',
      {
        ...INSPECTOR.headers,
        'mcp-session-id': virtual.init.headers['mcp-session-id'] as string,
        'mcp-protocol-version': '2025-11-25',
      },
    )
    const names = (list.response().result as { tools: { name: string }[] }).tools.map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining(['echo', 'get_forecast']))
    // A method the virtual server does not serve: -32601 in band for a 2025-era client (a 404
    // would read as a lost session), and no member sees it.
    const before = logs.seen.length
    const unknown = await rawPost(
      gw.mcpUrl('ws'),
      '{"method":"resources/subscribe","params":{"uri":"x://y"},"jsonrpc":"2.0","id":3}',
      {
        ...INSPECTOR.headers,
        'mcp-session-id': virtual.init.headers['mcp-session-id'] as string,
        'mcp-protocol-version': '2025-11-25',
      },
    )
    expect(unknown.status).toBe(200)
    expect(unknown.response()).toEqual({
      jsonrpc: '2.0',
      id: 3,
      error: { code: -32601, message: 'Method not found' },
    })
    expect(sdk.calls('resources/subscribe')).toHaveLength(0)
    expect(logs.seen.length).toBe(before)
  })
})

describe('3. server/discover with a 2025-only member', () => {
  async function setup() {
    // `logging` is what only this member declares: it shows the member is in merged discovery.
    const old = await closing(startV1Member({ logging: true }))
    const sdk = await closing(startSdkServer({ name: 'sdk' }))
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: { old: { upstreams: [{ url: old.url }] }, sdk: { upstreams: [{ url: sdk.url }] } },
      virtualServers: { ws: { members: ['old', 'sdk'] } },
    })
    return { old, gw }
  }

  const loggingCapability = (res: RawResponse): unknown =>
    (res.response().result as { capabilities?: Record<string, unknown> }).capabilities?.logging
  const initializes = (m: RecordingMember): number =>
    m.seen.filter((s) => s.method === 'initialize').length

  it('a second discover from the same caller does not initialise the member again', async () => {
    const { old, gw } = await setup()
    const first = await mcpPost(gw.mcpUrl('ws'), 'server/discover')
    expect(first.status).toBe(200)
    expect(loggingCapability(first)).toBeDefined() // from the 2025-only member's initialize
    expect(initializes(old)).toBe(1)
    const second = await mcpPost(gw.mcpUrl('ws'), 'server/discover')
    expect(second.response().result).toEqual(first.response().result)
    expect(initializes(old)).toBe(1)
  })

  // Failed before the fix: merged discovery opens a member session per caller, and a 2025-era client's
  // `initialize` is a discover in a brand-new client session, so every connect re-pays the
  // member's `initialize` (about 1 s for a fastmcp member, whose connect polls for the client's
  // capabilities 10 × 100 ms before it answers).
  it('discovery for further callers does not initialise the member again', async () => {
    const { old, gw } = await setup()
    const modern = await mcpPost(gw.mcpUrl('ws'), 'server/discover')
    expect(loggingCapability(modern)).toBeDefined()
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    }
    for (const client of ['a', 'b']) {
      const init = await rawPost(
        gw.mcpUrl('ws'),
        {
          ...LEGACY_INITIALIZE,
          params: { ...LEGACY_INITIALIZE.params, clientInfo: { name: client, version: '1' } },
        },
        headers,
      )
      expect(init.status).toBe(200)
      expect(loggingCapability(init)).toBeDefined()
    }
    expect(initializes(old)).toBe(1)
  })

  // Failed before the fix: the member's session is opened with the discover's fan-out deadline as its abort
  // signal, so a member slower to initialise than fanOutTimeoutMs (fastmcp takes about 1 s) has
  // its initialize cut off, the half-made session is forgotten, and every discover starts again:
  // each takes fanOutTimeoutMs and leaves the member out.
  it('a member slower to initialise than fanOutTimeoutMs is initialised once', async () => {
    let release = (): void => {}
    const held = new Promise<void>((resolve) => (release = resolve))
    const slow = await closing(startV1Member({ logging: true, holdInitialize: held }))
    const sdk = await closing(startSdkServer({ name: 'sdk' }))
    const gw = await startTestGateway({
      servers: { slow: { upstreams: [{ url: slow.url }] }, sdk: { upstreams: [{ url: sdk.url }] } },
      virtualServers: { ws: { members: ['slow', 'sdk'], fanOutTimeoutMs: 200 } },
    })
    const first = await mcpPost(gw.mcpUrl('ws'), 'server/discover')
    expect(first.status).toBe(200) // without the slow member: it missed the deadline
    release()
    await expect.poll(() => slow.answeredInitializes).toBe(1)
    const second = await mcpPost(gw.mcpUrl('ws'), 'server/discover')
    expect(loggingCapability(second)).toBeDefined() // the slow member's, now it has answered
    expect(initializes(slow)).toBe(1)
  })
})

describe('4. a name just listed is routable at once, in every prefix mode', () => {
  const TOOLS = ['search', 'fetch', 'doc_a', 'doc_b', 'doc_c'] // pages of 2: three pages
  const MODES = [
    ['alpha', 'always'],
    ['bravo', 'never'],
    ['charlie', 'onCollision'],
  ] as const

  async function setup() {
    const docs = await closing(startPagedMember(TOOLS, 2))
    const gw = await startTestGateway({
      servers: { docs: { upstreams: [{ url: docs.url }] } },
      virtualServers: Object.fromEntries(
        MODES.map(([name, prefix]) => [name, { members: ['docs'], prefix }]),
      ),
    })
    return { docs, gw }
  }

  /** tools/list page by page with the gateway's cursors: the names of each page. */
  async function walk(url: string): Promise<string[][]> {
    const pages: string[][] = []
    let cursor: string | undefined
    for (let i = 0; i < 10; i++) {
      const res = await mcpPost(url, 'tools/list', cursor === undefined ? {} : { cursor })
      const page = res.response().result as { tools: { name: string }[]; nextCursor?: string }
      pages.push(page.tools.map((t) => t.name))
      cursor = page.nextCursor
      if (cursor === undefined) break
    }
    return pages
  }

  /** Calls every listed name in turn, right after the walk: what each answered, what ran. */
  async function callAll(url: string, pages: string[][], docs: RecordingMember) {
    const answers: string[] = []
    for (const name of pages.flat()) {
      const msg = (await mcpPost(url, 'tools/call', { name, arguments: {} })).response()
      answers.push(msg.error === undefined ? textOf(msg.result ?? {}) : msg.error.message)
    }
    const ran = docs.seen.filter((s) => s.method === 'tools/call').map((s) => s.params?.name)
    return { answers, ran }
  }

  const expected = (prefix: string): string[][] => {
    const shown = prefix === 'always' ? TOOLS.map((t) => `docs_${t}`) : [...TOOLS]
    return [shown.slice(0, 2), shown.slice(2, 4), shown.slice(4)]
  }

  it('walking the pages, then calling each name, works in each mode', async () => {
    const { docs, gw } = await setup()
    for (const [name, prefix] of MODES) {
      const pages = await walk(gw.mcpUrl(name))
      expect(pages).toEqual(expected(prefix))
      const { answers } = await callAll(gw.mcpUrl(name), pages, docs)
      expect(answers).toEqual(TOOLS.map((t) => `ran ${t}`))
    }
  })

  // Failed before the fix: a first-page list while the name map is fresh (here another client starting its
  // own listing) restarts the member's name set with that page only and skips reading the other
  // pages (the map is "fresh"), so a page-2 or page-3 name this client was just given is
  // "-32602 Unknown tool" until the freshness (at least 1 s) has run out; then it works.
  for (const [name, prefix] of MODES) {
    it(`prefix: ${prefix}: every listed name works at once, whoever lists meanwhile`, async () => {
      const { docs, gw } = await setup()
      const pages = await walk(gw.mcpUrl(name))
      expect(pages).toEqual(expected(prefix))
      // Another client starts listing (its first page) before this one calls.
      const other = await mcpPost(gw.mcpUrl(name), 'tools/list')
      expect(other.status).toBe(200)
      const { answers, ran } = await callAll(gw.mcpUrl(name), pages, docs)
      expect(answers).toEqual(TOOLS.map((t) => `ran ${t}`))
      expect(ran).toEqual(TOOLS)
    })
  }
})

describe('5. a 60-character tool under prefix: always', () => {
  const LONG = 'summarise_every_quarterly_report_of_the_whole_organisation_x'
  const KNOWN = new Set([...SDK_SERVER_TOOLS].map((t) => `tickets_${t}`))

  async function exposedLongName(gw: TestGateway): Promise<string | undefined> {
    const res = await mcpPost(gw.mcpUrl('ws'), 'tools/list')
    const { tools } = res.response().result as { tools: { name: string }[] }
    const extra = tools.map((t) => t.name).filter((n) => !KNOWN.has(n))
    expect(extra.length).toBeLessThanOrEqual(1)
    return extra[0]
  }

  // Failed before the fix: `tickets_` + 60 characters exceeds 63 and the member part cannot shrink enough,
  // so the tool is listed nowhere (only /readyz names it: "too long to prefix; unreachable").
  it('is listed under a deterministic name of at most 64 characters, and reaches the member', async () => {
    expect(LONG).toHaveLength(60)
    const tickets = await closing(startSdkServer({ name: 'tickets', extraTools: [LONG] }))
    const config = {
      servers: { tickets: { upstreams: [{ url: tickets.url }] } },
      virtualServers: { ws: { members: ['tickets'], prefix: 'always' } },
    }
    const one = await startTestGateway(config)
    const two = await startTestGateway(config)
    const exposed = await exposedLongName(one)
    expect(exposed).toBeDefined()
    expect((exposed as string).length).toBeLessThanOrEqual(64)
    expect(exposed).toMatch(/^[a-zA-Z0-9_-]+$/)
    // Deterministic: another gateway with the same config names it the same.
    expect(await exposedLongName(two)).toBe(exposed)

    const res = await mcpPost(one.mcpUrl('ws'), 'tools/call', { name: exposed, arguments: {} })
    expect(textOf(res.response().result ?? {})).toBe(LONG)
    const seen = tickets.calls('tools/call').at(-1)
    expect((seen?.json() as { params: { name: string } }).params.name).toBe(LONG)
    expect(seen?.header('mcp-name')).toBe(LONG)
  })
})

describe('found while reproducing 4: each virtual server is served at its own path', () => {
  // Failed before 1456a23: app.ts registered `/mcp/:server{ws|ws2|tools}`; hono does not group
  // the alternation, so /mcp/ws2 was served by `ws` and /mcp/devtools (a server) by `tools`.
  it('/mcp/ws2 is ws2, and a server whose name ends in a virtual name is that server', async () => {
    const weather = await closing(startSdkServer({ name: 'weather' }))
    const tickets = await closing(startSdkServer({ name: 'tickets' }))
    const devtools = await closing(startSdkServer({ name: 'devtools' }))
    const gw = await startTestGateway({
      servers: {
        weather: { upstreams: [{ url: weather.url }] },
        tickets: { upstreams: [{ url: tickets.url }] },
        devtools: { upstreams: [{ url: devtools.url }] },
      },
      virtualServers: {
        ws: { members: ['weather'], prefix: 'always' },
        ws2: { members: ['tickets'], prefix: 'always' },
        tools: { members: ['weather'], prefix: 'always' },
      },
    })
    const list = await mcpPost(gw.mcpUrl('ws2'), 'tools/list')
    const names = (list.response().result as { tools: { name: string }[] }).tools.map((t) => t.name)
    expect(names).toContain('tickets_whoami')
    const who = await mcpPost(gw.mcpUrl('devtools'), 'tools/call', {
      name: 'whoami',
      arguments: {},
    })
    expect(textOf(who.response().result ?? {})).toBe('devtools')
  })
})
