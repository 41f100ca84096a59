import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpBody, mcpHeaders, rawPost } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { startNonValidatingBackend } from '../helpers/sdk-servers.js'

/** Browser clients: exact-origin CORS, never `*`, never for an origin that is not allowed. */
async function setup() {
  const backend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const gw = await startTestGateway({
    ...oneServer(backend.url),
    origins: ['https://app.example.test'],
  })
  return { backend, url: gw.mcpUrl('app') }
}

describe('CORS', () => {
  it('answers a preflight from an allowed origin with that origin, the MCP headers and Vary', async () => {
    const { backend, url } = await setup()
    const pre = await fetchOptions(
      url,
      'https://app.example.test',
      'content-type, mcp-protocol-version, mcp-method, mcp-name, Mcp-Param-Region, authorization',
    )
    expect(pre.status).toBe(204)
    expect(pre.headers.get('access-control-allow-origin')).toBe('https://app.example.test')
    expect(pre.headers.get('access-control-allow-headers')).toContain('mcp-param-region')
    expect(pre.headers.get('access-control-allow-methods')).toBe('POST, GET, DELETE')
    expect(pre.headers.get('vary')).toBe('Origin')
    expect(pre.headers.get('access-control-allow-credentials')).toBeNull()
    expect(backend.requests).toHaveLength(0)
  })

  it('accepts the W3C trace headers a browser OpenTelemetry client sends, from an allowed origin only', async () => {
    const { backend, url } = await setup()
    const requested = 'content-type, mcp-protocol-version, traceparent, tracestate, baggage'
    const pre = await fetchOptions(url, 'https://app.example.test', requested)
    expect(pre.status).toBe(204)
    expect(pre.headers.get('access-control-allow-origin')).toBe('https://app.example.test')
    expect(pre.headers.get('access-control-allow-headers')).toBe(requested)
    const other = await fetchOptions(url, 'https://evil.example', requested)
    expect(other.status).toBe(403)
    expect(other.headers.get('access-control-allow-origin')).toBeNull()
    expect(backend.requests).toHaveLength(0)
  })

  it('refuses a preflight from another origin, without one, or asking for other headers', async () => {
    const { backend, url } = await setup()
    expect((await fetchOptions(url, 'https://evil.example', 'content-type')).status).toBe(403)
    expect((await fetchOptions(url, undefined, 'content-type')).status).toBe(403)
    const odd = await fetchOptions(
      url,
      'https://app.example.test',
      'content-type, x-internal-admin',
    )
    expect(odd.status).toBe(403)
    expect(odd.headers.get('access-control-allow-origin')).toBeNull()
    expect(backend.requests).toHaveLength(0)
  })

  it('marks proxied answers and gateway errors for the allowed origin, and nothing for others', async () => {
    const { url } = await setup()
    const ok = await rawPost(url, mcpBody('tools/call', { name: 'echo' }), {
      ...mcpHeaders('tools/call', 'echo'),
      origin: 'https://app.example.test',
    })
    expect(ok.status).toBe(200)
    expect(ok.headers['access-control-allow-origin']).toBe('https://app.example.test')
    expect(ok.headers['access-control-expose-headers']).toContain('mcp-session-id')
    const err = await rawPost(url, mcpBody('tools/call', { name: 'echo' }), {
      ...mcpHeaders('tools/call', 'other'),
      origin: 'https://app.example.test',
    })
    expect(err.status).toBe(400)
    expect(err.headers['access-control-allow-origin']).toBe('https://app.example.test')
    const plain = await rawPost(
      url,
      mcpBody('tools/call', { name: 'echo' }),
      mcpHeaders('tools/call', 'echo'),
    )
    expect(plain.headers['access-control-allow-origin']).toBeUndefined()
  })
})

async function fetchOptions(
  url: string,
  origin: string | undefined,
  requested: string,
): Promise<Response> {
  const headers: Record<string, string> = {
    'access-control-request-method': 'POST',
    'access-control-request-headers': requested,
  }
  if (origin !== undefined) headers.origin = origin
  return fetch(url, { method: 'OPTIONS', headers })
}
