import { describe, expect, it } from 'vitest'
import { mergeReports } from '../../../src/status/merge.js'
import type { ProcessReport, ReplicaReport } from '../../../src/status/report.js'
import { NoReports, StatusService, type StatusSource } from '../../../src/status/service.js'

const replica = (over: Partial<ReplicaReport>): ReplicaReport => ({
  id: 'app#0',
  address: 'http://b/mcp',
  state: 'healthy',
  reason: null,
  until: null,
  inFlight: 1,
  streams: 0,
  lastCheck: null,
  outInWorkers: 0,
  ...over,
})

const report = (pid: number, over: Partial<ProcessReport> = {}): ProcessReport => ({
  pid,
  startedAt: 1000 + pid,
  draining: false,
  config: {
    file: null,
    digest: 'd1',
    policyId: null,
    policyMode: 'enforce',
    loadedAt: '2026-01-01T00:00:00.000Z',
  },
  lastReload: null,
  warnings: [],
  upstreamsOut: [],
  servers: [],
  virtualServers: [],
  cache: { entries: 2, bytes: 100, maxBytes: 1000, sharedTier: { state: 'connected' } },
  catalog: [],
  denials: [],
  denialsByRule: {},
  ruleHits: {},
  limited: [],
  configured: { servers: [], virtualServers: [], policies: null, cache: null, rateLimits: null },
  ...over,
})

describe('mergeReports (the workers of one primary)', () => {
  it('sums what adds up, keeps the worst state and the newest of what is last', () => {
    const a = report(1, {
      servers: [
        {
          name: 'app',
          replicas: [
            replica({ lastCheck: { at: '2026-01-01T00:00:01Z', ok: true, reason: null } }),
          ],
        },
      ],
      // A rule may be named __proto__: counted as that name, never as the object's prototype.
      denialsByRule: JSON.parse('{"no-deletes": 2, "__proto__": 1}') as Record<string, number>,
      denials: [
        {
          at: '2026-01-01T00:00:01Z',
          server: 'app',
          method: null,
          kind: 'tool',
          target: 'a',
          rule: 'r',
          reason: 'deny_rule',
          caller: 'x',
          dryRun: false,
        },
      ],
      warnings: ['w1', 'w2'],
    })
    const b = report(2, {
      servers: [
        {
          name: 'app',
          replicas: [
            replica({
              state: 'ejected',
              reason: '3 consecutive failures',
              inFlight: 2,
              outInWorkers: 1,
              lastCheck: { at: '2026-01-01T00:00:05Z', ok: true, reason: null },
            }),
          ],
        },
      ],
      denialsByRule: { 'no-deletes': 3 },
      ruleHits: { 'no-deletes': 3, reads: 7 },
      denials: [
        {
          at: '2026-01-01T00:00:09Z',
          server: 'app',
          method: null,
          kind: 'tool',
          target: 'b',
          rule: 'r',
          reason: 'deny_rule',
          caller: 'x',
          dryRun: false,
        },
      ],
      warnings: ['w2', 'w3'],
      cache: {
        entries: 3,
        bytes: 50,
        maxBytes: 1000,
        sharedTier: { state: 'bypassed', reason: 'not_answering' },
      },
    })
    const m = mergeReports([a, b])
    expect(m.pids).toEqual([1, 2])
    expect(m.ruleHits).toEqual({ 'no-deletes': 3, reads: 7 })
    expect(m.startedAt).toBe(1001)
    expect(m.servers[0]?.replicas[0]).toMatchObject({
      state: 'ejected',
      reason: '3 consecutive failures',
      inFlight: 3,
      outInWorkers: 1,
      lastCheck: { at: '2026-01-01T00:00:05Z' },
    })
    expect(m.denials.map((d) => d.target)).toEqual(['b', 'a'])
    expect(m.denialsByRule['no-deletes']).toBe(5)
    expect(Object.getOwnPropertyDescriptor(m.denialsByRule, '__proto__')?.value).toBe(1)
    expect(Object.getPrototypeOf(m.denialsByRule)).toBe(Object.prototype)
    expect(m.warnings).toEqual(['w1', 'w2', 'w3'])
    expect(m.cache).toMatchObject({
      entries: 5,
      bytes: 150,
      sharedTier: {
        state: 'bypassed',
        reason: 'not_answering',
        workers: { connected: 1, bypassed: 1 },
      },
    })
    expect(m.configAgrees).toBe(true)
    expect(
      mergeReports([a, report(3, { config: { ...a.config, digest: 'd2' } })]).configAgrees,
    ).toBe(false)
  })
})

describe('StatusService', () => {
  it('asks its source once for all callers at a time, and says when no process answered', async () => {
    let calls = 0
    let reports: ProcessReport[] = [report(1)]
    const source: StatusSource = {
      collect: async () => {
        calls++
        await new Promise((r) => setTimeout(r, 10))
        return { reports, metrics: [] }
      },
    }
    const service = new StatusService(
      source,
      { version: 't', workers: 1, warnings: ['exposed'] },
      0,
    )
    const [doc, ready] = await Promise.all([
      service.document(),
      service.readiness(),
      service.document(),
    ])
    expect(calls).toBe(1)
    expect(doc.gateway.warnings).toEqual(['exposed'])
    expect(ready).toMatchObject({
      ready: true,
      draining: false,
      sharedCache: { state: 'connected' },
    })
    reports = []
    await expect(service.document()).rejects.toBeInstanceOf(NoReports)
    service.close()
  })
})
