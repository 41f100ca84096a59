import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.js'
import { classify, type ClassifyPolicy } from '../../src/mcp/classify.js'
import { readRequestHead } from '../../src/mcp/request-head.js'

/**
 * reliability.md S-29, in CI size: mutated requests never crash the classifier, and every request
 * it lets through (with body verification on) is one whose headers agree with what a JavaScript
 * backend would read from the body — the property header-spoofing attacks try to break.
 */
const verify: ClassifyPolicy = {
  parseAlways: true,
  parseMethods: new Set(),
  allowLegacy: true,
  maxDepth: 64,
  judgesArguments: false,
}
const NAMED: Record<string, string> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
}

const method = fc.constantFrom(
  'tools/call',
  'tools/list',
  'prompts/get',
  'resources/read',
  'Tools/Call',
  'x/y',
  '',
)
const name = fc.oneof(
  fc.constantFrom('echo', 'delete_all', 'Echo', 'echo ', 'ｅcho', 'docs://a'),
  fc.string({ maxLength: 12 }),
)
const version = fc.constantFrom('2026-07-28', '2025-11-25', '2099-01-01', undefined)

/** A request whose body and headers are generated independently, so they often disagree. */
const request = fc.record({
  headerMethod: fc.option(method, { nil: undefined }),
  headerName: fc.option(name, { nil: undefined }),
  headerVersion: version,
  bodyMethod: method,
  bodyName: fc.option(name, { nil: undefined }),
  bodyVersion: version,
  id: fc.oneof(
    fc.integer(),
    fc.string({ maxLength: 5 }),
    fc.constant(null),
    fc.constant(undefined),
  ),
  // Textual mutations applied to the serialised body: duplicates, truncation, junk.
  mutation: fc.constantFrom(
    'none',
    'dup-name',
    'dup-method',
    'case-key',
    'truncate',
    'append',
    'proto',
  ),
})

type GeneratedRequest = typeof request extends fc.Arbitrary<infer T> ? T : never

function build(r: GeneratedRequest): { headers: string[]; body: Buffer } {
  const params: Record<string, unknown> = { arguments: {} }
  const field = NAMED[r.bodyMethod] ?? 'name'
  if (r.bodyName !== undefined) params[field] = r.bodyName
  if (r.bodyVersion !== undefined)
    params._meta = {
      'io.modelcontextprotocol/protocolVersion': r.bodyVersion,
      'io.modelcontextprotocol/clientCapabilities': {},
    }
  let text = JSON.stringify({
    jsonrpc: '2.0',
    ...(r.id === undefined ? {} : { id: r.id }),
    method: r.bodyMethod,
    params,
  })
  if (r.mutation === 'dup-name')
    text = text.replace('"arguments"', '"name":"delete_all","arguments"')
  if (r.mutation === 'dup-method') text = text.replace('"params"', '"method":"tools/list","params"')
  if (r.mutation === 'case-key') text = text.replace('"arguments"', '"Name":"x","arguments"')
  if (r.mutation === 'truncate') text = text.slice(0, Math.floor(text.length / 2))
  if (r.mutation === 'append') text += '{"x":1}'
  if (r.mutation === 'proto')
    text = text.replace('"arguments"', '"__proto__":{"name":"x"},"arguments"')
  const headers: string[] = []
  if (r.headerVersion !== undefined) headers.push('MCP-Protocol-Version', r.headerVersion)
  if (r.headerMethod !== undefined) headers.push('Mcp-Method', r.headerMethod)
  if (r.headerName !== undefined) headers.push('Mcp-Name', r.headerName)
  return { headers, body: Buffer.from(text) }
}

describe('classify under mutation', () => {
  it('only ever throws GatewayError, and lets through only requests whose headers match the body', () => {
    fc.assert(
      fc.property(request, (r) => {
        const { headers, body } = build(r)
        let info
        try {
          info = classify(readRequestHead(headers), body, verify)
        } catch (err) {
          expect(err).toBeInstanceOf(GatewayError)
          return
        }
        const parsed = JSON.parse(body.toString()) as {
          method?: string
          params?: Record<string, unknown>
        }
        expect(info.verified).toBe(true)
        expect(info.method).toBe(parsed.method)
        const head = readRequestHead(headers)
        if (head.method !== undefined) expect(head.method).toBe(parsed.method)
        const field = NAMED[parsed.method ?? '']
        if (field !== undefined) {
          const value = parsed.params?.[field]
          // What policy sees is exactly what the backend will execute.
          const target = info.targets[0]
          expect(
            target === undefined ? undefined : 'uri' in target ? target.uri : target.name,
          ).toBe(value)
          if (head.name !== undefined) expect(head.name).toBe(value)
        }
      }),
      { numRuns: 5000 },
    )
  })

  it('survives arbitrary bytes as a body', () => {
    const heads = [
      readRequestHead([
        'MCP-Protocol-Version',
        '2026-07-28',
        'Mcp-Method',
        'tools/call',
        'Mcp-Name',
        'a',
      ]),
      readRequestHead([]),
    ]
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(1), (bytes, h) => {
        try {
          classify(heads[h] as ReturnType<typeof readRequestHead>, Buffer.from(bytes), verify)
        } catch (err) {
          expect(err).toBeInstanceOf(GatewayError)
        }
      }),
      { numRuns: 5000 },
    )
  })
})
