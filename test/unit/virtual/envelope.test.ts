import { describe, expect, it } from 'vitest'
import { parseMessage } from '../../../src/mcp/jsonrpc.js'
import type { VirtualSession } from '../../../src/virtual/client-session.js'
import { modernise } from '../../../src/virtual/envelope.js'

const SESSION: VirtualSession = {
  id: 'x',
  version: '2025-11-25',
  capabilities: { elicitation: {} },
  clientInfo: { name: 'inspector', version: '1' },
}
const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'inspector', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
}

function run(text: string) {
  const message = parseMessage(Buffer.from(text), 64)
  const out = modernise(text, message, SESSION)
  return { out, text: out?.body.toString('utf8') }
}

describe('modernise', () => {
  it('adds the envelope and keeps every other byte, big ids and arguments included', () => {
    const body =
      '{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{"name":"echo","arguments":{"n":1.50}}}'
    const { out, text } = run(body)
    expect(text).toBe(
      `{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{"_meta":${JSON.stringify(ENVELOPE)},"name":"echo","arguments":{"n":1.50}}}`,
    )
    expect(out?.message.params?._meta).toEqual(ENVELOPE)
    expect(out?.message.params?.name).toBe('echo')
  })

  it('merges into an existing _meta (progress token) without a second key', () => {
    const body =
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":7},"name":"a"}}'
    const { text } = run(body)
    const parsed = JSON.parse(text as string) as { params: { _meta: Record<string, unknown> } }
    expect(parsed.params._meta).toEqual({ progressToken: 7, ...ENVELOPE })
    expect(text?.match(/"_meta"/g)).toHaveLength(1)
  })

  it('gives a request without params one, and an empty params its envelope', () => {
    expect(
      JSON.parse(run('{"jsonrpc":"2.0","id":"a","method":"tools/list"}').text as string),
    ).toEqual({
      params: { _meta: ENVELOPE },
      jsonrpc: '2.0',
      id: 'a',
      method: 'tools/list',
    })
    expect(
      JSON.parse(
        run('{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}').text as string,
      ),
    ).toEqual({
      jsonrpc: '2.0',
      id: 'a',
      method: 'tools/list',
      params: { _meta: ENVELOPE },
    })
  })

  it('refuses a params the reader did not take for an object (never a second params key)', () => {
    // parseMessage refuses this already; modernise does not rely on it.
    const text = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}'
    const message = {
      kind: 'request' as const,
      method: 'tools/list',
      params: undefined,
      rawId: '1',
    }
    expect(modernise(text, message, SESSION)).toBeUndefined()
  })
})
