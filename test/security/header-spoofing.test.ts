import { describe, expect, it, onTestFinished } from 'vitest'
import { encodeHeaderValue, mcpBody, mcpHeaders, rawPost } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { httpHead, sendRaw } from '../helpers/raw-socket.js'
import { startNonValidatingBackend } from '../helpers/sdk-servers.js'

/**
 * The confused-deputy attack SEP-2243 warns about (streamable-http §Server Validation): an edge
 * that routes or decides on the headers while a backend that does not check them executes the
 * body. With `trustHeaders: false` no such request may reach the backend.
 */
async function setup(server: Record<string, unknown> = {}) {
  const backend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const gw = await startTestGateway(oneServer(backend.url, { trustHeaders: false, ...server }))
  return { backend, url: gw.mcpUrl('app') }
}

const deleteAll = (id: number | string = 1) =>
  mcpBody('tools/call', { name: 'delete_all', arguments: {} }, id)

describe('header/body disagreement never reaches a backend that does not check headers', () => {
  it.each([
    ['Mcp-Method says tools/list, the body calls a tool', mcpHeaders('tools/list'), deleteAll(41)],
    ['Mcp-Name names an innocent tool', mcpHeaders('tools/call', 'read_file'), deleteAll(42)],
    [
      'a base64 sentinel decodes to an innocent tool',
      { ...mcpHeaders('tools/call'), 'mcp-name': encodeHeaderValue('read file ') },
      deleteAll(43),
    ],
    [
      'the version header is a 2025 one over a 2026 envelope',
      { ...mcpHeaders('tools/call', 'delete_all'), 'mcp-protocol-version': '2025-11-25' },
      deleteAll(44),
    ],
    ['no Mcp-Name at all', mcpHeaders('tools/call'), deleteAll(45)],
    ['Mcp-Method in another case', mcpHeaders('Tools/Call', 'delete_all'), deleteAll(46)],
    [
      'resources/read of another URI',
      mcpHeaders('resources/read', 'docs://public'),
      mcpBody('resources/read', { uri: 'file:///etc/passwd' }, 47),
    ],
    [
      'prompts/get of another prompt',
      mcpHeaders('prompts/get', 'greet'),
      mcpBody('prompts/get', { name: 'leak_secrets' }, 48),
    ],
  ])('%s → 400 / -32020 with the id', async (_label, headers, body) => {
    const { backend, url } = await setup()
    const res = await rawPost(url, body, headers)
    expect(res.status).toBe(400)
    expect(res.response()).toMatchObject({ id: body.id, error: { code: -32020 } })
    expect(backend.requests).toHaveLength(0)
  })

  it('refuses duplicate and case-variant keys where a differently-parsing backend could pick the other', async () => {
    const { backend, url } = await setup()
    const headers = mcpHeaders('tools/call', 'read_file')
    const dup = JSON.stringify(mcpBody('tools/call', { name: 'read_file' }, 50)).replace(
      '"name":"read_file"',
      '"name":"delete_all","name":"read_file"',
    )
    expect((await rawPost(url, dup, headers)).response()).toMatchObject({
      id: 50,
      error: { code: -32600 },
    })
    const variant = JSON.stringify(mcpBody('tools/call', { name: 'read_file' }, 51)).replace(
      '"name":"read_file"',
      '"Name":"delete_all","name":"read_file"',
    )
    expect((await rawPost(url, variant, headers)).response()).toMatchObject({
      id: 51,
      error: { code: -32600 },
    })
    const proto = JSON.stringify(mcpBody('tools/call', { name: 'read_file' }, 52)).replace(
      '"name":"read_file"',
      '"__proto__":{"name":"x"},"name":"read_file"',
    )
    expect((await rawPost(url, proto, headers)).status).toBe(400)
    expect(backend.requests).toHaveLength(0)
  })

  it('forwards an agreeing request byte for byte, with gateway-owned identity headers', async () => {
    const { backend, url } = await setup()
    // Odd spacing and key order must survive: the gateway never re-serialises a request.
    const body = ` { "params" : {"name":"read_file","arguments":{"path":"/a"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}, "id":7,"method":"tools/call","jsonrpc":"2.0"}\n`
    const res = await rawPost(url, body, {
      ...mcpHeaders('tools/call', 'read_file'),
      'mcp-param-region': 'eu',
      'x-forwarded-for': '10.9.9.9',
      forwarded: 'for=10.9.9.9',
      'x-real-ip': '10.9.9.9',
      'proxy-authorization': 'Basic eA==',
      cookie: 'session=abc',
    })
    expect(res.status).toBe(200)
    const [seen] = backend.requests
    expect(seen?.body.toString('utf8')).toBe(body)
    expect(seen?.header('mcp-param-region')).toBe('eu')
    expect(seen?.header('x-forwarded-for')).toBe('127.0.0.1')
    for (const h of ['forwarded', 'x-real-ip', 'proxy-authorization', 'cookie', 'authorization']) {
      expect(seen?.header(h), h).toBeUndefined()
    }
  })

  it('drops hop-by-hop headers and the ones Connection nominates (RFC 9110 §7.6.1), never answering 101', async () => {
    const b = await startNonValidatingBackend()
    onTestFinished(() => b.close())
    const gw = await startTestGateway(oneServer(b.url, { trustHeaders: true }))
    const body = JSON.stringify(mcpBody('tools/list', {}, 8))
    const res = await sendRaw(gw.port, [
      httpHead('POST', '/mcp/app', [
        ['host', 'gw'],
        ['content-type', 'application/json'],
        ['mcp-protocol-version', '2026-07-28'],
        ['mcp-method', 'tools/list'],
        ['connection', 'keep-alive, X-Secret-Hop, Upgrade'],
        ['x-secret-hop', 'drop me'],
        ['upgrade', 'h2c'],
        ['te', 'trailers'],
        ['keep-alive', 'timeout=5'],
        ['content-length', String(Buffer.byteLength(body))],
      ]) + body,
    ])
    expect(res.status).toBe(200)
    const [seen] = b.requests
    for (const h of ['x-secret-hop', 'upgrade', 'te', 'keep-alive'])
      expect(seen?.header(h), h).toBeUndefined()
  })

  it('judges a header-less 2025 client by its body', async () => {
    const { backend, url } = await setup()
    const res = await rawPost(
      url,
      { jsonrpc: '2.0', id: 60, method: 'tools/call', params: { name: 'delete_all' } },
      {
        'content-type': 'application/json',
        'mcp-method': 'tools/list',
      },
    )
    expect(res.status).toBe(400)
    expect(res.response()).toMatchObject({ id: 60, error: { code: -32020 } })
    expect(backend.requests).toHaveLength(0)
  })
})
