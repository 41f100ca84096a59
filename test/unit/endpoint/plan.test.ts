import { pino } from 'pino'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { EndpointCall } from '../../../src/endpoint/call.js'
import { forwardHeaders } from '../../../src/endpoint/headers.js'
import { planAttempt, type PlanOptions, type PlanServer } from '../../../src/endpoint/plan.js'
import { GatewayError } from '../../../src/errors.js'
import type { McpRequestInfo } from '../../../src/mcp/classify.js'
import { parseMessage } from '../../../src/mcp/jsonrpc.js'
import { compileHeaderRules } from '../../../src/mcp/owned-headers.js'
import { readRequestHead } from '../../../src/mcp/request-head.js'
import { createMetrics } from '../../../src/observability/metrics.js'
import { parseConfigText } from '../../../src/runtime/load.js'
import type { AttemptPlan } from '../../../src/upstream/attempts.js'
import { ServerBalancing } from '../../../src/upstream/balancing.js'
import { compileDeadlines } from '../../../src/upstream/deadlines.js'
import { Lifecycle } from '../../../src/upstream/lifecycle.js'

/**
 * planAttempt, the one plan builder (docs/design/member-path.md): one row per thing it decides
 * before the attempt loop, on a server `app` with two replicas, a route for `admin_*` tools and a
 * deadline for `tools/call`.
 */

const CONFIG = `
servers:
  app:
    upstreams: [{ url: "http://127.0.0.1:1/mcp" }, { url: "http://127.0.0.1:2/mcp" }]
    routes: [{ tools: ["admin_*"], upstreams: [{ url: "http://127.0.0.1:3/mcp" }] }]
    timeouts: { methods: { tools/call: 1500 } }
    events: { callbacks: ["https://hooks.example.com/*"] }
`

function server(): PlanServer & { readonly balancing: ServerBalancing } {
  const { config } = parseConfigText(CONFIG, { dir: '.' })
  const cfg = config.servers['app']!
  const balancing = new ServerBalancing('app', cfg, ['X-Api-Key', 'configured'], {
    log: pino({ level: 'silent' }),
    metrics: createMetrics(false),
    lifecycle: new Lifecycle(),
    sessionKey: Buffer.alloc(32, 7),
  })
  onTestFinished(() => balancing.close())
  return {
    name: 'app',
    balancing,
    upstreamHeaders: ['X-Api-Key', 'configured'],
    classify: { maxDepth: 64 },
    config: cfg,
    deadlines: compileDeadlines('app', cfg.timeouts, () => undefined),
  }
}

const RULES = compileHeaderRules(['X-Api-Key'], undefined)
const PRINCIPAL = { issuer: 'https://idp.example.com', subject: 'alice', claims: {} }

/** A judged POST of `message` (parsed, as classify leaves it) to `app`, 2026-07-28. */
function post(
  message: Record<string, unknown>,
  over: Partial<McpRequestInfo> = {},
  head: readonly string[] = [],
): EndpointCall {
  const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...message }))
  const parsed = parseMessage(body, 64)
  const name = (message.params as { name?: string } | undefined)?.name
  const mcp: McpRequestInfo = {
    era: 'modern',
    version: '2026-07-28',
    method: message.method as string,
    kind: parsed.kind === 'request' ? 'request' : 'notification',
    targets: name === undefined ? [] : [{ kind: 'tool', name }],
    verified: true,
    message: parsed,
    ...over,
  }
  return {
    http: 'POST',
    requestId: 'req-1',
    mcp,
    head: readRequestHead(['Host', 'gw.example', 'Mcp-Method', mcp.method ?? '', ...head], RULES),
    body,
    principal: PRINCIPAL as EndpointCall['principal'],
    peer: '203.0.113.7',
    headers: {},
    trace: undefined,
    span: () => ({}) as never,
  }
}

const OPTS: PlanOptions = { tasks: 'none', maxInspectBytes: 1 << 20, maxStreams: 2 }

function planOf(s: PlanServer, call: EndpointCall, opts: Partial<PlanOptions> = {}): AttemptPlan {
  const planned = planAttempt(s, call, { ...OPTS, ...opts })
  if (planned.kind !== 'plan') throw new Error(`answered in band: ${planned.outcome}`)
  return planned.plan
}

const CALL = { id: 7, method: 'tools/call', params: { name: 'get_forecast', arguments: {} } }

describe('planAttempt', () => {
  it('a tools/call: headers from forwardHeaders, the body as judged, never retried once sent', () => {
    const s = server()
    const call = post(CALL)
    const plan = planOf(s, call, { auth: 'Bearer exchanged' })
    expect(plan.headers).toEqual(
      forwardHeaders(s.upstreamHeaders, call, 'Bearer exchanged', undefined, undefined),
    )
    expect(plan.headers).toContain('Bearer exchanged')
    expect(plan.body).toBe(call.body)
    expect(plan.method).toBe('POST')
    expect(plan.safe).toBe(false)
    expect(plan.expected).toBe('7')
    expect(plan.pool).toBe(s.balancing.pool)
    expect(plan.stop).toBeUndefined()
    expect(plan.legacy).toBe(false)
  })

  it.each([
    ['tools/list', { id: 1, method: 'tools/list', params: {} }, true],
    ['resources/read', { id: 1, method: 'resources/read', params: { uri: 'x://a' } }, true],
    ['prompts/get', { id: 1, method: 'prompts/get', params: { name: 'p' } }, true],
    ['tools/call', CALL, false],
  ])('%s: retry-safe is %s', (_m, message, safe) => {
    expect(planOf(server(), post(message)).safe).toBe(safe)
  })

  it('a notification expects no answer id and is never retried', () => {
    const plan = planOf(server(), post({ method: 'notifications/initialized' }))
    expect(plan.expected).toBeNull()
    expect(plan.safe).toBe(false)
    expect(plan.deadline).toBeUndefined()
  })

  it("a tool with a route goes to the route's pool", () => {
    const s = server()
    const plan = planOf(s, post({ ...CALL, params: { name: 'admin_reset', arguments: {} } }))
    expect(plan.pool).toBe(s.balancing.routes[0]?.pool)
  })

  it("the method's deadline; a long-lived stream has none and holds a slot of its caller", () => {
    const s = server()
    expect(planOf(s, post(CALL)).deadline).toBeDefined()
    const listen = post({
      id: 2,
      method: 'subscriptions/listen',
      params: { notifications: { toolsListChanged: true } },
    })
    const first = planOf(s, listen)
    expect(first.deadline).toBeUndefined()
    expect(first.stop).toBeDefined()
    planOf(s, listen)
    // SECURITY: maxStreams (2) per caller; the third is refused before anything is sent.
    expect(() => planOf(s, listen)).toThrow(GatewayError)
    s.balancing.lifecycle.closeStream(first.stop!)
    expect(planOf(s, listen).stop).toBeDefined()
  })

  it('a list filter reads the whole answer (rewrite), a plain call only checks it (pass)', () => {
    const s = server()
    const list = post({ id: 1, method: 'tools/list', params: {} })
    const filtered = planOf(s, list, {
      listFilter: { kind: 'tools', visible: () => true } as never,
    })
    const plain = planOf(s, list)
    const type = { 'content-type': 'application/json' }
    expect(plain.transform?.(200, type)?.constructor.name).toBe('JsonPass')
    expect(filtered.transform?.(200, type)?.constructor.name).toBe('JsonResult')
    // A 5xx answer is judged by the dispatch itself, whatever the hooks.
    expect(plain.transform?.(502, type)).toBeUndefined()
  })

  it('header changes: another method and name, encoded; the client copies dropped', () => {
    const call = post(CALL, {}, ['Mcp-Name', 'get_forecast'])
    const plan = planOf(server(), call, {
      changes: { method: 'tools/call', name: 'forecast_é' },
    })
    expect(plan.headers.filter((h) => h.toLowerCase() === 'mcp-name')).toHaveLength(1)
    expect(plan.headers[plan.headers.indexOf('mcp-name') + 1]).toBe('=?base64?Zm9yZWNhc3Rfw6k=?=')
  })

  it('refuses an events/subscribe callback outside events.callbacks before anything is sent', () => {
    const subscribe = (url: string) =>
      post({
        id: 3,
        method: 'events/subscribe',
        params: { name: 'build', delivery: { mode: 'webhook', url } },
      })
    expect(() => planOf(server(), subscribe('http://169.254.169.254/latest'))).toThrow(GatewayError)
    expect(planOf(server(), subscribe('https://hooks.example.com/build')).body).toBeDefined()
  })

  it('a 2025-era session id the caller was not given is refused (404), never guessed at', () => {
    const call = post(CALL, { era: 'legacy', version: '2025-11-25' }, ['Mcp-Session-Id', 'forged'])
    expect(() => planOf(server(), call)).toThrow(
      expect.objectContaining({ code: 'session_not_found' }),
    )
  })

  it("own task ids: another principal's tasks/list is answered by the gateway", () => {
    const planned = planAttempt(server(), post({ id: 4, method: 'tasks/list', params: {} }), {
      ...OPTS,
      tasks: 'own',
    })
    expect(planned).toMatchObject({ kind: 'answer', outcome: 'tasks_list_local' })
  })
})
