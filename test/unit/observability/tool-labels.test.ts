import { describe, expect, it } from 'vitest'
import { ToolCatalog } from '../../../src/observability/tool-labels.js'

const list = (...names: unknown[]) => ({ result: { tools: names.map((name) => ({ name })) } })

describe('ToolCatalog', () => {
  it('labels only names a server listed, per server; everything else is other', () => {
    const catalog = new ToolCatalog(() => 0)
    catalog.learner('weather')?.(list('get_forecast', 42, '', 'x'.repeat(129)), { sse: false })
    expect(catalog.label('weather', 'get_forecast')).toBe('get_forecast')
    expect(catalog.label('weather', 'made_up')).toBe('other')
    expect(catalog.label('other-server', 'get_forecast')).toBe('other')
    expect(catalog.label('weather', 'x'.repeat(129))).toBe('other')
  })

  it('reads a server list at most every 30 s and keeps at most 512 names', () => {
    let now = 0
    const catalog = new ToolCatalog(() => now)
    const first = catalog.learner('s')
    expect(first).toBeDefined()
    expect(catalog.learner('s')).toBeUndefined()
    now = 29_999
    expect(catalog.learner('s')).toBeUndefined()
    now = 30_000
    const many = Array.from({ length: 600 }, (_, i) => `t${i}`)
    catalog.learner('s')?.(list(...many), { sse: false })
    expect(catalog.label('s', 't511')).toBe('t511')
    expect(catalog.label('s', 't512')).toBe('other')
  })
})
