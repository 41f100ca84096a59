import { describe, expect, it } from 'vitest'
import { argumentsOf, judge } from '../../../src/endpoint/judge.js'
import type { AuditLog } from '../../../src/observability/audit.js'
import { createMetrics } from '../../../src/observability/metrics.js'
import { policyOf } from '../policy/fixtures.js'

const message = (method: string, params: Record<string, unknown> | undefined) =>
  ({ kind: 'request', method, params, rawId: '1' }) as const

describe('argumentsOf', () => {
  it('reads the arguments of the methods that carry them, from the parsed message', () => {
    const args = { city: 'Paris' }
    expect(argumentsOf(message('tools/call', { name: 't', arguments: args }))).toBe(args)
    expect(argumentsOf(message('prompts/get', { name: 'p', arguments: args }))).toBe(args)
    const argument = { name: 'lang', value: 'py' }
    const ref = { type: 'ref/prompt', name: 'p' }
    expect(argumentsOf(message('completion/complete', { ref, argument }))).toBe(argument)
  })

  it('has none for other methods, a call without arguments, or an unread body', () => {
    expect(argumentsOf(message('resources/read', { uri: 'a://b', arguments: {} }))).toBeUndefined()
    expect(argumentsOf(message('tools/list', { arguments: {} }))).toBeUndefined()
    expect(argumentsOf(message('tools/call', { name: 't' }))).toBeUndefined()
    expect(argumentsOf(message('tools/call', undefined))).toBeUndefined()
    expect(argumentsOf(undefined)).toBeUndefined()
  })
})

describe('judge', () => {
  it('hands the call arguments and request id to the audit record with the decision', () => {
    const entries: unknown[] = []
    const audit: AuditLog = {
      record: (e) => void entries.push(e),
      rateLimited: () => undefined,
      accessRefused: () => undefined,
      drift: () => undefined,
    }
    const policy = policyOf('rules: [{ name: all, servers: ["*"], allow: { tools: ["*"] } }]')
    const args = { city: 'Paris' }
    const target = { kind: 'tool', name: 'get' } as const
    const d = judge(
      policy,
      { audit, metrics: createMetrics() },
      {
        endpoint: 's',
        server: 's',
        requestId: 'req-1',
        principal: undefined,
        method: 'tools/call',
        target,
        args,
      },
    )
    expect(d.allow).toBe(true)
    expect(entries).toEqual([
      expect.objectContaining({ requestId: 'req-1', server: 's', target, args, decision: d }),
    ])
  })
})
