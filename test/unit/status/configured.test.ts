import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { parseConfigText } from '../../../src/runtime/load.js'
import { ConfigRecord } from '../../../src/status/config-record.js'
import { configuredView } from '../../../src/status/configured.js'
import { DenialLog } from '../../../src/status/denials.js'
import type { Decision } from '../../../src/policy/policy.js'

/** The configuration section's view of a running config (status/configured.ts). */
function loaded(config: string, policy: string) {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-configured-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'policies'))
  writeFileSync(join(dir, 'policies/a.yaml'), policy)
  return parseConfigText(config, { dir, env: { SECRET: 'sk-live-do-not-show', PASS: 'hunter2' } })
}

const CONFIG = `
policies: ./policies
cache: { redis: "redis://:\${PASS}@10.0.0.9:6379" }
rateLimits: { replicas: 3 }
servers:
  weather:
    upstreams: [{ url: "http://127.0.0.1:9101/mcp" }, { url: "http://127.0.0.1:9103/mcp", weight: 3 }]
    headers: { Authorization: "Bearer \${SECRET}" }
    balance: round-robin
    healthCheck: { intervalMs: 2000 }
    timeouts: { methods: { "tools/call": 30000 }, tools: { "slow_*": 600000 } }
    routes: [{ tools: ["render_*"], upstreams: [{ url: "http://10.0.0.3/mcp" }] }]
  docs:
    upstreams: [{ url: "http://127.0.0.1:9102/mcp" }]
virtualServers:
  workspace: { members: [weather, docs], prefix: always, resources: { "docs://*": docs } }
`
const POLICY = `
rules:
  - name: reads
    servers: [weather]
    allow: { tools: ["get_*"] }
  - name: analysts
    servers: ["*"]
    when: { claims: { groups: analysts } }
    allow: { tools: [query] }
    if: 'args.db == "sales"'
limits:
  - name: alerts
    servers: [weather]
    tools: [get_alerts]
    key: ip
    rate: 3/minute
`

describe('the configuration view', () => {
  it('names servers, balancing, deadlines, health checks, routes, rules, limits, virtual servers', () => {
    const { config, policy } = loaded(CONFIG, POLICY)
    const v = configuredView(config, policy)
    const weather = v.servers.find((s) => s.name === 'weather')
    expect(weather).toMatchObject({
      replicas: 2,
      weights: [1, 3],
      balance: 'round-robin',
      healthCheck: { intervalMs: 2000, timeoutMs: 1000, unhealthyAfter: 3, healthyAfter: 2 },
      deadlines: [
        { kind: 'methods', name: 'tools/call', ms: 30_000 },
        { kind: 'tools', name: 'slow_*', ms: 600_000 },
      ],
      routes: [{ names: ['tools: render_*'], replicas: 1 }],
    })
    expect(v.servers.find((s) => s.name === 'docs')?.healthCheck).toBeNull()
    expect(v.virtualServers).toEqual([
      {
        name: 'workspace',
        members: ['weather', 'docs'],
        prefix: 'always',
        fanOutTimeoutMs: 2000,
        resources: [{ pattern: 'docs://*', member: 'docs' }],
      },
    ])
    expect(v.policies?.rules).toEqual([
      expect.objectContaining({ name: 'reads', servers: ['weather'], allow: ['tools: get_*'] }),
      expect.objectContaining({
        name: 'analysts',
        when: true,
        condition: 'if: args.db == "sales"',
      }),
    ])
    expect(v.policies?.limits).toEqual([
      expect.objectContaining({
        name: 'alerts',
        counts: ['tools: get_alerts'],
        key: 'ip',
        rate: '3/minute',
        burst: 3,
      }),
    ])
    expect(v.cache).toMatchObject({ shared: true })
    expect(v.rateLimits).toEqual({ redis: false, replicas: 3 })
  })

  it('shows no secret: header values, the Redis URL and its password stay out', () => {
    const { config, policy } = loaded(CONFIG, POLICY)
    const text = JSON.stringify(configuredView(config, policy))
    for (const secret of [
      'sk-live-do-not-show',
      'hunter2',
      'redis://',
      'Authorization',
      '10.0.0.9',
    ])
      expect(text).not.toContain(secret)
  })
})

describe('rule hits', () => {
  it('counts every decision under the rule that made it, allowed or not', () => {
    const log = new DenialLog(false)
    const by = (rule: string | undefined, allow: boolean): Decision =>
      ({
        allow,
        rule: rule === undefined ? undefined : { name: rule },
        dryRun: false,
        conditions: [],
      }) as unknown as Decision
    log.decided(by('reads', true))
    log.decided(by('reads', true))
    log.decided(by('no-deletes', false))
    log.decided(by(undefined, false))
    expect(log.report().hits).toEqual({ reads: 2, 'no-deletes': 1, '(default deny)': 1 })
  })
})

describe('the last reload', () => {
  it('is resolved once the refused files are back to what runs, and applied by the next reload', () => {
    let now = Date.parse('2026-12-01T00:00:00Z')
    const { config, policy } = loaded(CONFIG, POLICY)
    const record = new ConfigRecord('gw.yaml', config, policy, () => now)
    record.observe(['reload rejected: policies/a.yaml: rules[0].alow: unknown key'])
    expect(record.report().lastReload).toMatchObject({ outcome: 'refused', resolvedAt: null })
    now += 5000
    record.observe([]) // the watcher found nothing to change: the edit was undone
    expect(record.report().lastReload).toMatchObject({
      outcome: 'refused',
      resolvedAt: '2026-12-01T00:00:05.000Z',
    })
    record.applied('policies', config, policy)
    expect(record.report().lastReload).toMatchObject({ outcome: 'applied', resolvedAt: null })
    record.observe([]) // nothing refused: nothing to resolve
    expect(record.report().lastReload?.outcome).toBe('applied')
  })
})
