import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/errors.js'
import type { McpTarget } from '../../../src/mcp/classify.js'
import { parseMessage, type JsonRpcMessage } from '../../../src/mcp/jsonrpc.js'
import { renderDenial } from '../../../src/policy/denial.js'
import { callbackProblem, refuseCallback } from '../../../src/policy/event-callbacks.js'
import { compileLimit, limitApplies } from '../../../src/limits/rules.js'
import { limitSchema } from '../../../src/limits/schema.js'
import { parseConfigText } from '../../../src/runtime/load.js'
import { policyOf } from './fixtures.js'

const event = (name: string): McpTarget => ({ kind: 'event', name })

describe('policy on event types', () => {
  const policy = policyOf(`
rules:
  - name: ci-events
    servers: [weather]
    allow:
      events: ["ci.*"]
      tools: ["*"]
  - name: no-secrets
    servers: ["*"]
    deny:
      events: ["ci.secret*"]
`)

  it.each([
    ['ci.failed', true],
    ['ci.secret_rotated', false],
    ['CI.failed', false],
    ['deploy.done', false],
  ])('%s allowed: %s (default deny, deny wins, exact bytes)', (name, allow) => {
    expect(policy.check(undefined, 'weather', event(name)).allow).toBe(allow)
  })

  it('a tools allowance says nothing about events', () => {
    expect(policy.check(undefined, 'weather', { kind: 'tool', name: 'ci.failed' }).allow).toBe(true)
    expect(policy.check(undefined, 'docs', event('ci.failed')).allow).toBe(false)
  })

  it('filters events/list like tools/list', () => {
    const filter = policy.listFilter(undefined, 'weather')
    const out = filter?.apply('events/list', {
      events: [{ name: 'ci.failed' }, { name: 'ci.secret_rotated' }, { name: 'deploy' }, {}],
      nextCursor: 'x',
    })
    expect(out).toEqual({ events: [{ name: 'ci.failed' }], nextCursor: 'x' })
  })

  it('answers a denied event as an unknown one, with the raw id', () => {
    expect(renderDenial(event('ci.secret'), '"a"')).toBe(
      '{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"Unknown event: ci.secret"}}',
    )
  })

  it('rate limits count event types under `events:`', () => {
    const limit = compileLimit({
      limit: limitSchema.parse({
        name: 'polls',
        servers: ['*'],
        events: ['ci.*'],
        key: 'ip',
        rate: '10/minute',
      }),
      source: 't',
    })
    expect(limitApplies(limit, undefined, 'events/poll', [event('ci.failed')])).toBe(true)
    expect(limitApplies(limit, undefined, 'events/poll', [event('deploy')])).toBe(false)
    expect(limitApplies(limit, undefined, 'tools/call', [{ kind: 'tool', name: 'ci.x' }])).toBe(
      false,
    )
  })
})

describe('event callbacks (events.callbacks)', () => {
  it('a duplicate url key never reaches the check (strict JSON)', () => {
    const text = `{"jsonrpc":"2.0","id":1,"method":"events/subscribe","params":{"name":"n","delivery":{"url":"https://hooks.example.com/a","url":"http://169.254.169.254/"}}}`
    expect(() => parseMessage(Buffer.from(text), 64)).toThrow(GatewayError)
  })

  const hooks = [
    'https://hooks.example.com/*',
    'http://127.0.0.1:8080/hook',
    'https://*.example.com/*',
  ]

  it.each([
    ['https://hooks.example.com/mcp/1', undefined],
    ['http://127.0.0.1:8080/hook', undefined],
    ['https://a.example.com/x?y=1', undefined],
  ])('%s is allowed', (url, problem) => {
    expect(callbackProblem(url, hooks)).toBe(problem)
  })

  it.each([
    ['https://hooks.example.com/x', [], /allows no event callbacks/],
    ['https://evil.example.net/x', hooks, /no events.callbacks pattern/],
    ['https://hooks.example.com:443/x', hooks, /canonical/],
    ['HTTPS://hooks.example.com/x', hooks, /canonical/],
    ['https://hooks.example.com/a/../x', hooks, /canonical/],
    ['https://user:pw@hooks.example.com/x', hooks, /credentials/],
    ['http://127.0.0.1:8081/hook', hooks, /no events.callbacks pattern/],
    ['http://2130706433/', ['http://*'], /canonical/],
    ['http://169.254.169.254/latest/meta-data/', ['*'], /link-local/],
    ['http://169.254.169.254/latest', ['http://169.254.169.254/*'], /link-local/],
    ['https://[fe80::1]/x', ['*'], /link-local/],
    ['https://10.1.2.3/x', ['https://*'], /internal address/],
    ['https://127.0.0.1/x', ['https://*'], /internal address/],
    ['https://[::1]/x', ['https://*'], /internal address/],
    ['https://[::ffff:7f00:1]/x', ['https://*'], /internal address/],
    ['https://localhost/x', ['https://*'], /internal address/],
    ['https://metadata/x', ['https://*'], /internal address/],
    ['https://db.internal/x', ['https://*'], /internal address/],
    ['http://hooks.example.com/x', ['*'], /plain http/],
    ['ftp://hooks.example.com/x', ['*'], /http\(s\)/],
    ['not a url', ['*'], /not a URL/],
    [
      'https://evil.test/.example.com/x',
      ['https://*.example.com/*'],
      /no events.callbacks pattern/,
    ],
    ['https://a.example.com:8443/x', ['https://*.example.com/*'], /no events.callbacks pattern/],
    ['https://hooks.example.com.evil.test/x', ['https://hooks.example.com'], /no events/],
  ])('%s is refused', (url, patterns, problem) => {
    expect(callbackProblem(url, patterns)).toMatch(problem)
  })

  it('refuses with -32602 (invalid_params), reading params.delivery.url', () => {
    const message = (delivery: unknown): JsonRpcMessage => ({
      kind: 'request',
      method: 'events/subscribe',
      rawId: '1',
      params: { name: 'ci.failed', delivery },
    })
    const refused = (patterns: readonly string[] | undefined, delivery: unknown) => {
      try {
        refuseCallback(patterns, message(delivery))
        return undefined
      } catch (err) {
        return err instanceof GatewayError ? err.code : 'other'
      }
    }
    expect(refused(hooks, { mode: 'webhook', url: 'https://hooks.example.com/a' })).toBe(undefined)
    expect(refused(undefined, { mode: 'webhook', url: 'https://hooks.example.com/a' })).toBe(
      'invalid_params',
    )
    expect(refused(hooks, { mode: 'webhook', url: 'http://169.254.169.254/' })).toBe(
      'invalid_params',
    )
    expect(refused(hooks, { mode: 'webhook' })).toBe('invalid_params')
    // what a case-folding (Go encoding/json) or NUL-stopping reader would take for the URL
    const ok = 'https://hooks.example.com/a'
    expect(refused(hooks, { url: ok, URL: 'http://169.254.169.254/' })).toBe('case_variant_key')
    expect(refused(hooks, { url: ok, 'url\u0000x': 'http://10.0.0.1/' })).toBe('case_variant_key')
    const variant: JsonRpcMessage = {
      kind: 'request',
      method: 'events/subscribe',
      rawId: '1',
      params: { name: 'n', delivery: { url: ok }, Delivery: { url: 'http://10.0.0.1/' } },
    }
    expect(() => refuseCallback(hooks, variant)).toThrow(GatewayError)
    expect(refused(hooks, 'https://hooks.example.com/a')).toBe('invalid_params')
  })
})

describe('events.callbacks in the config', () => {
  const config = (callbacks: string) =>
    `servers:\n  ci:\n    upstreams: [{ url: "http://127.0.0.1:1/mcp" }]\n    events: { callbacks: ${callbacks} }\n`
  it('defaults to none and takes URL patterns', () => {
    const none = parseConfigText(
      'servers:\n  ci:\n    upstreams: [{ url: "http://127.0.0.1:1/mcp" }]\n',
      { dir: '.' },
    )
    expect(none.config.servers['ci']?.events.callbacks).toEqual([])
    const some = parseConfigText(config('["https://hooks.example.com/*", "*"]'), { dir: '.' })
    expect(some.config.servers['ci']?.events.callbacks).toEqual([
      'https://hooks.example.com/*',
      '*',
    ])
  })
  it.each(['["hooks.example.com/*"]', '["*.example.com"]', '[""]', '["ftp://x/"]'])(
    'refuses %s',
    (callbacks) => {
      expect(() => parseConfigText(config(callbacks), { dir: '.' })).toThrow(/callbacks/)
    },
  )
})
