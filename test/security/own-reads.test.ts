/**
 * The gateway's own reads (`mcp-edge pin`, `pin --check`, the run-time probe) must not be told
 * apart from client traffic: a backend that could would show them the reviewed text and clients
 * another (docs/catalog.md §The gateway's own reads). Their ids are random, their `clientInfo` is
 * configurable, and their headers are those of a client's request through the gateway.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { definitionDigest } from '../../src/catalog/definition.js'
import { renderLock } from '../../src/catalog/lock.js'
import { pinCommand } from '../../src/cli/pin.js'
import { mcpPost } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startRecordingBackend, type ReceivedRequest } from '../helpers/recording-backend.js'
import { startLegacyV1Server } from '../helpers/sdk-servers.js'

const VSCODE = { name: 'Visual Studio Code', version: '1.99.3' }

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-own-reads-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

let errors = ''

/** Runs `mcp-edge pin [args]`; its exit code, and what it wrote to stderr into `errors`. */
async function pin(
  dir: string,
  config: Record<string, unknown>,
  ...args: string[]
): Promise<number> {
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, stringify(config))
  return pinCommand(file, ['--config', file, ...args], {
    out: () => undefined,
    err: (t) => void (errors += t),
    color: false,
  })
}

interface Body {
  readonly id?: unknown
  readonly method?: string
  readonly params?: {
    readonly clientInfo?: unknown
    readonly _meta?: Readonly<Record<string, unknown>>
  }
}

function bodyOf(r: ReceivedRequest): Body {
  return JSON.parse(r.body.toString('utf8')) as Body
}

/** [name, value] pairs in wire order, names lower-case. */
function headerPairs(r: ReceivedRequest): [string, string][] {
  const out: [string, string][] = []
  for (let i = 0; i < r.rawHeaders.length; i += 2)
    out.push([(r.rawHeaders[i] as string).toLowerCase(), r.rawHeaders[i + 1] as string])
  return out
}

/** A gateway whose lock pins tool `x` of `app`: a call to it before any list makes it probe. */
async function probingGateway(url: string, extra: Record<string, unknown> = {}) {
  const dir = tempDir()
  const x = { name: 'x' }
  const tools = new Map([['x', { digest: definitionDigest('tools', x), definition: x }]])
  const lock = { version: 1 as const, servers: new Map([['app', { tools, prompts: new Map() }]]) }
  writeFileSync(join(dir, 'catalog.lock.yaml'), renderLock(lock))
  return startTestGateway(
    {
      servers: { app: { upstreams: [{ url }] } },
      pinning: { lockFile: './catalog.lock.yaml' },
      ...extra,
    },
    { dir, start: { watch: false } },
  )
}

/** Makes `gw` probe `app`'s tools/list once; returns what the backend received of it. */
async function probe(
  backend: { requests: ReceivedRequest[] },
  gw: { mcpUrl(s: string): string },
): Promise<ReceivedRequest> {
  const before = backend.requests.length
  const res = await mcpPost(gw.mcpUrl('app'), 'tools/call', { name: 'x', arguments: {} }, { id: 5 })
  // The recording backend lists no tools: the call stays unknown, and is not forwarded.
  expect(res.response().error).toMatchObject({ code: -32602, message: 'Unknown tool: x' })
  const seen = backend.requests.slice(before)
  expect(seen.map((r) => bodyOf(r).method)).toEqual(['tools/list'])
  return seen[0] as ReceivedRequest
}

describe("the gateway's own reads", () => {
  it('the run-time probe carries the headers of a client request through the gateway', async () => {
    const backend = await closing(startRecordingBackend())
    const gw = await probingGateway(`${backend.origin}/mcp`, {
      ownRequests: { host: 'gateway.example:8443' },
    })
    const client = new Client({ name: 'c', version: '1' }, { versionNegotiation: { mode: 'auto' } })
    await client
      .connect(new StreamableHTTPClientTransport(new URL(gw.mcpUrl('app'))))
      .catch(() => undefined) // the recording backend's discover result is no real one
    const fromClient = backend.requests.find((r) => bodyOf(r).method === 'server/discover')
    expect(fromClient).toBeDefined()
    const own = await probe(backend, gw)

    const clientHeaders = headerPairs(fromClient as ReceivedRequest)
    const ownHeaders = headerPairs(own)
    // The same names, in the same order.
    expect(ownHeaders.map(([n]) => n)).toEqual(clientHeaders.map(([n]) => n))
    // The same values, but for the method, the length and the configured X-Forwarded-Host.
    const differ = new Set(['mcp-method', 'content-length', 'x-forwarded-host'])
    const values = (h: [string, string][]) => h.filter(([n]) => !differ.has(n))
    expect(values(ownHeaders)).toEqual(values(clientHeaders))
    expect(ownHeaders).toContainEqual(['x-forwarded-host', 'gateway.example:8443'])
    expect(ownHeaders).toContainEqual(['x-forwarded-for', '127.0.0.1'])
    expect(ownHeaders).toContainEqual(['user-agent', 'node'])
  })

  it('probe ids are random integers; clientInfo is the configured one (default too)', async () => {
    const backend = await closing(startRecordingBackend())
    const ids: unknown[] = []
    for (let i = 0; i < 4; i++) {
      const gw = await probingGateway(`${backend.origin}/mcp`, {
        ownRequests: { clientInfo: VSCODE, clientCapabilities: { elicitation: {} } },
      })
      const body = bodyOf(await probe(backend, gw))
      ids.push(body.id)
      expect(body.params?._meta).toEqual({
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientInfo': VSCODE,
        'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
      })
      expect(backend.requests.at(-1)?.body.toString()).not.toContain('mcp-edge')
    }
    for (const id of ids) expect(Number.isInteger(id)).toBe(true)
    expect(new Set(ids).size).toBeGreaterThan(1)

    const plain = await probingGateway(`${backend.origin}/mcp`)
    const body = bodyOf(await probe(backend, plain))
    expect(body.params?._meta?.['io.modelcontextprotocol/clientInfo']).toEqual({
      name: 'claude-ai',
      version: '0.1.0',
    })
  })

  it('pin and pin --check: random ids, the configured client, X-Forwarded-For; 2025-era initialize too', async () => {
    const modern = await closing(startRecordingBackend())
    const legacy = await closing(startLegacyV1Server())
    const dir = tempDir()
    const config = {
      servers: {
        modern: { upstreams: [{ url: `${modern.origin}/mcp` }] },
        old: { upstreams: [{ url: legacy.url }] },
      },
      ownRequests: { clientInfo: VSCODE, address: '10.1.2.3' },
    }
    expect(await pin(dir, config)).toBe(0)
    expect(await pin(dir, config, '--check')).toBe(0)
    expect(await pin(dir, config, '--check')).toBe(0)

    const discovers = modern.requests.filter((r) => bodyOf(r).method === 'server/discover')
    expect(discovers).toHaveLength(3)
    const ids = discovers.map((r) => bodyOf(r).id)
    for (const id of ids) expect(Number.isInteger(id)).toBe(true)
    expect(new Set(ids).size).toBeGreaterThan(1)
    for (const r of discovers) {
      expect(bodyOf(r).params?._meta?.['io.modelcontextprotocol/clientInfo']).toEqual(VSCODE)
      expect(headerPairs(r)).toContainEqual(['x-forwarded-for', '10.1.2.3'])
      expect(headerPairs(r)).toContainEqual(['sec-fetch-mode', 'cors'])
    }

    const inits = legacy.calls('initialize')
    expect(inits.length).toBeGreaterThanOrEqual(3)
    const initIds = inits.map((r) => (r.json() as Body).id)
    for (const id of initIds) expect(Number.isInteger(id)).toBe(true)
    expect(new Set(initIds).size).toBeGreaterThan(1)
    for (const r of inits) {
      expect((r.json() as Body).params?.clientInfo).toEqual(VSCODE)
      expect(r.header('x-forwarded-for')).toBe('10.1.2.3')
    }
  })

  it('the config refuses own-read headers the gateway owns', async () => {
    const dir = tempDir()
    const code = await pin(dir, {
      servers: { a: { upstreams: [{ url: 'http://127.0.0.1:1/mcp' }] } },
      ownRequests: { headers: { 'Mcp-Method': 'x', authorization: 'Bearer y', accept: '*/*' } },
    })
    expect(code).toBe(2)
    expect(errors).toContain('ownRequests.headers.Mcp-Method: the gateway owns this header')
    expect(errors).toContain('ownRequests.headers.authorization: the gateway sets or drops')
    expect(errors).toContain('ownRequests.headers.accept: the gateway sets or drops')
  })
})
