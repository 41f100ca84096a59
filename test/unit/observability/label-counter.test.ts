import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { LabelCounter } from '../../../src/observability/label-counter.js'

describe('LabelCounter', () => {
  it('counts per label set and reads as a prom-client counter, in text and get()', async () => {
    const registry = new Registry()
    const c = new LabelCounter(registry, 'x_total', 'Things', ['server', 'reason'] as const)
    c.inc({ server: 'docs', reason: 'private' })
    c.inc({ server: 'docs', reason: 'private' }, 2)
    c.inc({ server: 'docs', reason: 'no_ttl' })
    c.inc({ server: 'weather', reason: 'private' })
    const read = await c.get()
    expect(read.values).toEqual([
      { labels: { server: 'docs', reason: 'private' }, value: 3 },
      { labels: { server: 'docs', reason: 'no_ttl' }, value: 1 },
      { labels: { server: 'weather', reason: 'private' }, value: 1 },
    ])
    const text = await registry.metrics()
    expect(text).toContain('# TYPE x_total counter')
    expect(text).toContain('x_total{server="docs",reason="private"} 3')
    expect(text).toContain('x_total{server="weather",reason="private"} 1')
    // A label value is text, never a key path: one containing the separator of a joined key.
    c.inc({ server: 'do', reason: 'cs\u0000private' })
    expect((await c.get()).values).toHaveLength(4)
    registry.resetMetrics()
    expect((await c.get()).values).toEqual([])
  })
})
