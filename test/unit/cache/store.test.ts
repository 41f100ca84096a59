import { describe, expect, it } from 'vitest'
import { createEntry, type CacheEntry } from '../../../src/cache/entry.js'
import { MemoryTier } from '../../../src/cache/store.js'

function entryOf(key: string, now: number, lifeMs = 60_000, pad = 0): CacheEntry {
  const result = {
    tools: [{ name: 'x'.repeat(pad) }],
    resultType: 'complete',
    cacheScope: 'public',
    ttlMs: lifeMs,
  }
  return createEntry(
    { jsonrpc: '2.0', id: 1, result },
    { scope: 'public', ttlMs: lifeMs, lifeMs },
    {
      key,
      server: 's',
      method: 'tools/list',
      uri: undefined,
      storedAt: now,
    },
  )
}

describe('MemoryTier', () => {
  it('expires entries by the injected clock, keeping them for the stale window only', () => {
    let now = 1_000_000
    const tier = new MemoryTier({
      maxBytes: 1 << 20,
      maxEntryBytes: 1 << 16,
      staleMs: 5_000,
      now: () => now,
    })
    expect(tier.setEntry(entryOf('k', now, 60_000))).toBe(true)
    now += 59_999
    expect(tier.getFresh('k')).toBeDefined()
    now += 1
    expect(tier.getFresh('k')).toBeUndefined() // stale: not served normally
    expect(tier.get('k')).toBeDefined() // but still there for stale-if-error
    now += 5_000
    expect(tier.get('k')).toBeUndefined()
  })

  it('never holds more than maxBytes and reports evictions', () => {
    const drops: string[] = []
    const tier = new MemoryTier({
      maxBytes: 10_000,
      maxEntryBytes: 5_000,
      staleMs: 0,
      now: () => 0,
      onDrop: (r) => drops.push(r),
    })
    for (let i = 0; i < 50; i++) tier.setEntry(entryOf(`k${i}`, 0, 60_000, 1_000))
    expect(tier.bytes).toBeLessThanOrEqual(10_000)
    expect(tier.size).toBeGreaterThan(0)
    expect(drops.filter((d) => d === 'evict').length).toBe(50 - tier.size)
    expect(tier.getFresh('k49')).toBeDefined()
    expect(tier.getFresh('k0')).toBeUndefined()
  })

  it('refuses an entry larger than maxEntryBytes', () => {
    const tier = new MemoryTier({
      maxBytes: 1 << 20,
      maxEntryBytes: 1_000,
      staleMs: 0,
      now: () => 0,
    })
    expect(tier.setEntry(entryOf('big', 0, 60_000, 2_000))).toBe(false)
    expect(tier.size).toBe(0)
  })

  it('drops by key prefix', () => {
    const tier = new MemoryTier({
      maxBytes: 1 << 20,
      maxEntryBytes: 1 << 16,
      staleMs: 0,
      now: () => 0,
    })
    for (const k of [
      'a:tools/list:-:1',
      'a:tools/list:-:2',
      'a:prompts/list:-:1',
      'b:tools/list:-:1',
    ]) {
      tier.setEntry(entryOf(k, 0))
    }
    expect(tier.dropPrefixes(['a:tools/list:'])).toBe(2)
    expect(tier.size).toBe(2)
  })
})
