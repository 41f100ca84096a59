import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import {
  GATEWAY_INFO,
  LEGACY_VERSION,
  LEGACY_VERSIONS,
  MODERN_VERSION,
  MODERN_VERSIONS,
  OFFERED_LEGACY_VERSIONS,
} from '../../../src/mcp/protocol.js'

const PACKAGE = JSON.parse(
  readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'),
) as { name: string; version: string }

describe('the protocol module', () => {
  it('names the gateway as its package.json does', () => {
    expect(GATEWAY_INFO).toEqual({ name: PACKAGE.name, version: PACKAGE.version })
    expect(Object.isFrozen(GATEWAY_INFO)).toBe(true)
  })

  it('speaks 2026-07-28, and offers 2025-era clients the revisions it can translate', () => {
    expect(MODERN_VERSION).toBe('2026-07-28')
    expect(MODERN_VERSIONS).toEqual(['2026-07-28'])
    expect(LEGACY_VERSION).toBe('2025-11-25')
    expect(OFFERED_LEGACY_VERSIONS).toEqual(['2025-11-25', '2025-06-18', '2025-03-26'])
    expect([...LEGACY_VERSIONS]).toEqual([
      '2025-11-25',
      '2025-06-18',
      '2025-03-26',
      '2024-11-05',
      '2024-10-07',
    ])
  })
})
