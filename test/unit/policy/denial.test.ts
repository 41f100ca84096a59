import { describe, expect, it } from 'vitest'
import { renderDenial } from '../../../src/policy/denial.js'

describe('denials look like unknown targets', () => {
  it.each([
    [
      { kind: 'tool', name: 'delete_station' } as const,
      '7',
      '{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Unknown tool: delete_station"}}',
    ],
    [
      { kind: 'prompt', name: 'review' } as const,
      '"a-1"',
      '{"jsonrpc":"2.0","id":"a-1","error":{"code":-32602,"message":"Unknown prompt: review"}}',
    ],
    [
      { kind: 'resource', uri: 'docs://secret' } as const,
      '12345678901234567890',
      '{"jsonrpc":"2.0","id":12345678901234567890,"error":{"code":-32602,"message":"Resource not found: docs://secret","data":{"uri":"docs://secret"}}}',
    ],
    [
      { kind: 'skill', name: 'skill://acme/refunds/SKILL.md' } as const,
      '5',
      '{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"No skill is served at skill://acme/refunds/SKILL.md"}}',
    ],
    [
      { kind: 'tool', name: 'quote"\\\n' } as const,
      '"\\u0041"',
      '{"jsonrpc":"2.0","id":"\\u0041","error":{"code":-32602,"message":"Unknown tool: quote\\"\\\\\\n"}}',
    ],
  ])('%j with id %s', (target, rawId, expected) => {
    const body = renderDenial(target, rawId)
    expect(body).toBe(expected)
    expect(body).not.toMatch(/gateway|policy/i)
    expect(() => JSON.parse(body) as unknown).not.toThrow()
  })
})
