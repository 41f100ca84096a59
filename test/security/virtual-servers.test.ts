import { describe, expect, it } from 'vitest'
import { ConfigError, parseConfigText } from '../../src/runtime/load.js'
import { envelope, mcpHeaders, mcpPost, rawPost } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startNonValidatingBackend, startSdkServer } from '../helpers/sdk-servers.js'

/** Two members that trust whatever they get, both serving `echo` (so it is prefixed). */
async function setup(tools = ['echo', 'search']) {
  const a = await closing(startNonValidatingBackend({ tools }))
  const b = await closing(startNonValidatingBackend({ tools: ['echo'] }))
  const gw = await startTestGateway({
    servers: { a: { upstreams: [{ url: a.url }] }, b: { upstreams: [{ url: b.url }] } },
    virtualServers: { ws: { members: ['a', 'b'] } },
  })
  return { a, b, gw, url: gw.mcpUrl('ws') }
}

function received(...servers: { requests: readonly unknown[] }[]): number {
  return servers.reduce((n, s) => n + s.requests.length, 0)
}

describe('virtual server cursors', () => {
  it('refuses a forged cursor with -32602, the request id, and asks no member', async () => {
    const { a, b, url } = await setup()
    const res = await mcpPost(
      url,
      'tools/list',
      { cursor: 'eyJ4IjoxfQ.AAAAAAAAAAAAAAAAAAAAAA' },
      { id: 'f1' },
    )
    expect(res.status).toBe(400)
    expect(res.response()).toMatchObject({
      id: 'f1',
      error: { code: -32602, data: { source: 'gateway', reason: 'invalid_params' } },
    })
    expect(received(a, b)).toBe(0)
  })

  it('refuses an altered cursor, and a cursor of another list', async () => {
    const a = await closing(startSdkServer({ name: 'a', toolsPageSize: 2 }))
    const b = await closing(startNonValidatingBackend({ tools: ['other'] }))
    const gw = await startTestGateway({
      servers: { a: { upstreams: [{ url: a.url }] }, b: { upstreams: [{ url: b.url }] } },
      virtualServers: { ws: { members: ['a', 'b'] } },
    })
    const url = gw.mcpUrl('ws')
    const first = (await mcpPost(url, 'tools/list')).response().result as { nextCursor?: string }
    const cursor = first.nextCursor as string
    expect(typeof cursor).toBe('string')
    // The member's own cursor ("2") is not what the client sees.
    expect(cursor).not.toBe('2')
    const seen = a.calls('tools/list').length + b.requests.length
    // The payload names member 0 with its cursor; pointing it at another offset breaks the seal.
    const [body, tag] = cursor.split('.') as [string, string]
    const forged = Buffer.from(JSON.stringify([[0, '0']])).toString('base64url')
    // The tag's last character carries spare bits: a spelling that decodes alike is refused too.
    const last = tag.at(-1) === 'A' ? 'B' : 'A'
    const altered = `${tag[0] === 'A' ? 'B' : 'A'}${tag.slice(1)}`
    for (const bad of [
      `${forged}.${tag}`,
      `${body}.${altered}`,
      `${body}.${tag.slice(0, -1)}${last}`,
      `${body}x.${tag}`,
    ]) {
      const res = await mcpPost(url, 'tools/list', { cursor: bad }, { id: 9 })
      expect(res.status).toBe(400)
      expect(res.response()).toMatchObject({ id: 9, error: { code: -32602 } })
    }
    const other = await mcpPost(url, 'prompts/list', { cursor }, { id: 10 })
    expect(other.status).toBe(400)
    expect(other.response()).toMatchObject({ id: 10, error: { code: -32602 } })
    expect(a.calls('tools/list').length + b.requests.length).toBe(seen)
    // The genuine cursor works.
    const next = await mcpPost(url, 'tools/list', { cursor })
    expect(next.status).toBe(200)
  })
})

describe('virtual server routing', () => {
  it('changes only params.name and Mcp-Name when a prefix comes off; the id and big integers stay byte for byte', async () => {
    const { a, b, url } = await setup()
    await mcpPost(url, 'tools/list')
    const body =
      '{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{"name":"a_echo",' +
      `"arguments":{"n":12345678901234567891,"name":"a_echo","s":"\\u0061"},"_meta":${JSON.stringify(envelope())}}}`
    const res = await rawPost(url, body, mcpHeaders('tools/call', 'a_echo'))
    // The member reads the id as the nearest double and answers 12345678901234567000: not this
    // request's id, so its answer is refused (JSON-RPC 2.0 §5); what it received is exact.
    expect(res.status).toBe(502)
    expect(res.text).toContain('"id":12345678901234567890,')
    expect(res.text).toContain('"reason":"upstream_id_mismatch"')
    const call = a.calls('tools/call')[0]
    expect(call?.body.toString('utf8')).toBe(
      body.replace('"params":{"name":"a_echo"', '"params":{"name":"echo"'),
    )
    expect(call?.header('mcp-name')).toBe('echo')
    expect(b.calls('tools/call')).toHaveLength(0)
  })

  it('refuses an Mcp-Name that disagrees with the body before routing; nothing is forwarded', async () => {
    const { a, b, url } = await setup()
    await mcpPost(url, 'tools/list')
    const before = received(a, b)
    const res = await mcpPost(
      url,
      'tools/call',
      { name: 'a_echo', arguments: {} },
      {
        id: 3,
        headers: { 'mcp-name': 'b_echo' },
      },
    )
    expect(res.status).toBe(400)
    expect(res.response()).toMatchObject({ id: 3, error: { code: -32020 } })
    expect(received(a, b)).toBe(before)
  })

  it('answers an unknown name as a server does, and forwards nothing', async () => {
    const { a, b, url } = await setup()
    await mcpPost(url, 'tools/list')
    // `echo` collides: only a_echo and b_echo exist, the bare name reaches nobody.
    for (const name of ['echo', 'c_echo', 'nothing']) {
      const res = await mcpPost(url, 'tools/call', { name, arguments: {} }, { id: 'u' })
      expect(res.status).toBe(200)
      expect(res.response()).toMatchObject({
        id: 'u',
        error: { code: -32602, message: `Unknown tool: ${name}` },
      })
    }
    // Only list reads may go out (to learn who serves a name); never the call.
    expect(a.calls('tools/call')).toHaveLength(0)
    expect(b.calls('tools/call')).toHaveLength(0)
  })

  it('refuses a resource URI two members serve when resources: does not route it', async () => {
    const a = await closing(startSdkServer({ name: 'a' }))
    const b = await closing(startSdkServer({ name: 'b' }))
    const gw = await startTestGateway({
      servers: { a: { upstreams: [{ url: a.url }] }, b: { upstreams: [{ url: b.url }] } },
      virtualServers: { ws: { members: ['a', 'b'] } },
    })
    const url = gw.mcpUrl('ws')
    const list = (await mcpPost(url, 'resources/list')).response().result as {
      resources: unknown[]
    }
    expect(list.resources).toEqual([])
    const res = await mcpPost(url, 'resources/read', { uri: 'docs://readme' }, { id: 4 })
    expect(res.status).toBe(400)
    expect(res.response()).toMatchObject({ id: 4, error: { code: -32602 } })
    expect(a.calls('resources/read')).toHaveLength(0)
    expect(b.calls('resources/read')).toHaveLength(0)
  })
})

describe('virtual server config', () => {
  const base = { servers: { a: { upstreams: [{ url: 'http://127.0.0.1:1/mcp' }] } } }
  const load = (virtualServers: unknown): string[] => {
    try {
      parseConfigText(JSON.stringify({ ...base, virtualServers }), { dir: '.', env: {} })
      return []
    } catch (err) {
      if (err instanceof ConfigError) return [...err.problems]
      throw err
    }
  }

  it('refuses unknown members, a name shared with a server, no members, routes to non-members', () => {
    expect(load({ ws: { members: ['a', 'nope'] } })).toContain(
      'virtualServers.ws.members: unknown server nope',
    )
    expect(load({ a: { members: ['a'] } })).toEqual([
      'virtualServers.a: a server is already named a (both would be /mcp/a)',
    ])
    expect(load({ ws: { members: [] } }).join('\n')).toContain('at least one member is required')
    expect(load({ ws: { members: ['a'], resources: { 'x://*': 'b' } } })).toEqual([
      'virtualServers.ws.resources.x://*: b is not a member',
    ])
    expect(load({ ws: { members: ['a'], prefix: 'sometimes' } }).join('\n')).toContain(
      'virtualServers.ws.prefix',
    )
    expect(load({ ws: { members: ['a'] } })).toEqual([])
  })
})
