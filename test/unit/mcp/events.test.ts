import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/errors.js'
import { classify, type ClassifyPolicy } from '../../../src/mcp/classify.js'
import {
  EVENT_NAME_METHODS,
  isKnownMethod,
  isStreamMethod,
  RETRY_SAFE_METHODS,
  CACHEABLE_METHODS,
  ALL_METHODS,
} from '../../../src/mcp/methods.js'
import { readRequestHead } from '../../../src/mcp/request-head.js'

const MODERN = '2026-07-28'
const policy: ClassifyPolicy = {
  parseAlways: true,
  parseMethods: new Set(),
  allowLegacy: true,
  maxDepth: 64,
  judgesArguments: false,
}
const head = (h: Record<string, string>) => readRequestHead(Object.entries(h).flat())
const modern = (method: string, name?: string) =>
  head({
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...(name === undefined ? {} : { 'mcp-name': name }),
  })
const body = (method: string, params: Record<string, unknown>, version = MODERN) =>
  Buffer.from(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method,
      params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': version } },
    }),
  )
function reason(fn: () => unknown): string | undefined {
  try {
    fn()
    return undefined
  } catch (err) {
    if (err instanceof GatewayError) return err.code
    throw err
  }
}

describe('the events extension in the method table', () => {
  it('knows the client methods in both eras, and no server notification as a client method', () => {
    for (const era of ['modern', 'legacy'] as const) {
      for (const m of [
        'events/list',
        'events/poll',
        'events/stream',
        'events/subscribe',
        'events/unsubscribe',
      ])
        expect(isKnownMethod(era, m), `${era} ${m}`).toBe(true)
      for (const m of ['notifications/events/event', 'notifications/events/heartbeat'])
        expect(isKnownMethod(era, m), `${era} ${m}`).toBe(false)
    }
    expect(ALL_METHODS.has('notifications/events/terminated')).toBe(true)
  })

  it('holds events/stream like subscriptions/listen and never caches or retries a poll', () => {
    expect(isStreamMethod('events/stream')).toBe(true)
    expect(isStreamMethod('subscriptions/listen')).toBe(true)
    expect(isStreamMethod('events/poll')).toBe(false)
    expect(isStreamMethod(undefined)).toBe(false)
    expect(CACHEABLE_METHODS.has('events/poll')).toBe(false)
    expect(RETRY_SAFE_METHODS.has('events/poll')).toBe(false)
    expect(RETRY_SAFE_METHODS.has('events/subscribe')).toBe(false)
    expect([...EVENT_NAME_METHODS].sort()).toEqual([
      'events/poll',
      'events/stream',
      'events/subscribe',
      'events/unsubscribe',
    ])
  })
})

describe('classify: the event name an events/* request names', () => {
  it.each(['events/poll', 'events/stream', 'events/subscribe', 'events/unsubscribe'])(
    '%s names params.name, read from the body (no Mcp-Name needed)',
    (method) => {
      const info = classify(modern(method), body(method, { name: 'pr.merged' }), policy)
      expect(info.targets).toEqual([{ kind: 'event', name: 'pr.merged' }])
    },
  )

  it('names the event for a 2025-era client too', () => {
    const info = classify(
      head({ 'mcp-protocol-version': '2025-11-25' }),
      body('events/poll', { name: 'pr.merged' }, '2025-11-25'),
      policy,
    )
    expect(info.targets).toEqual([{ kind: 'event', name: 'pr.merged' }])
  })

  it('refuses a request without a name, and a name with control characters', () => {
    expect(reason(() => classify(modern('events/poll'), body('events/poll', {}), policy))).toBe(
      'invalid_params',
    )
    expect(
      reason(() => classify(modern('events/poll'), body('events/poll', { name: 7 }), policy)),
    ).toBe('invalid_params')
    expect(
      reason(() =>
        classify(modern('events/stream'), body('events/stream', { name: 'a\u202eb' }), policy),
      ),
    ).toBe('invalid_name')
  })

  it('compares an Mcp-Name a client sends anyway with the body, byte for byte', () => {
    const ok = classify(
      modern('events/poll', 'pr.merged'),
      body('events/poll', { name: 'pr.merged' }),
      policy,
    )
    expect(ok.targets).toEqual([{ kind: 'event', name: 'pr.merged' }])
    expect(
      reason(() =>
        classify(modern('events/poll', 'allowed'), body('events/poll', { name: 'secret' }), policy),
      ),
    ).toBe('header_mismatch')
  })

  it('lists take no target', () => {
    expect(classify(modern('events/list'), body('events/list', {}), policy).targets).toEqual([])
  })
})
