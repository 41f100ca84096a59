import { describe, expect, it } from 'vitest'
import { decideStore, isCacheableRequest } from '../../../src/cache/policy.js'

const rules = { allowPrivate: false, maxTtlMs: 300_000 }
const msg = (result: Record<string, unknown>) => ({ jsonrpc: '2.0', id: 1, result })
const list = (over: Record<string, unknown>) =>
  msg({ tools: [], resultType: 'complete', ttlMs: 60_000, cacheScope: 'public', ...over })

describe('decideStore', () => {
  it('stores complete public results with a positive integer ttl', () => {
    expect(decideStore(list({}), rules, false)).toEqual({
      scope: 'public',
      ttlMs: 60_000,
      lifeMs: 60_000,
    })
  })

  it('caps the lifetime at maxTtlMs but keeps the backend ttl', () => {
    expect(decideStore(list({ ttlMs: 3_600_000 }), rules, false)).toEqual({
      scope: 'public',
      ttlMs: 3_600_000,
      lifeMs: 300_000,
    })
  })

  it.each([
    ['ttlMs 0 (immediately stale)', { ttlMs: 0 }],
    ['negative ttlMs', { ttlMs: -5 }],
    ['fractional ttlMs', { ttlMs: 1.5 }],
    ['missing ttlMs', { ttlMs: undefined }],
    ['string ttlMs', { ttlMs: '60000' }],
    ['missing cacheScope (private by default)', { cacheScope: undefined }],
    ['unknown cacheScope', { cacheScope: 'shared' }],
    ['private scope with per-caller caching off', { cacheScope: 'private' }],
    ['input_required', { resultType: 'input_required' }],
    ['missing resultType', { resultType: undefined }],
  ])('never stores %s', (_name, over) => {
    expect(decideStore(list(over), rules, true)).toBeUndefined()
  })

  it('never stores errors', () => {
    expect(
      decideStore({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'x' } }, rules, true),
    ).toBeUndefined()
    expect(
      decideStore({ ...list({}), error: { code: 1, message: 'both' } }, rules, true),
    ).toBeUndefined()
  })

  it('stores private results only with cache.private and an authorization context', () => {
    const priv = list({ cacheScope: 'private' })
    expect(decideStore(priv, { ...rules, allowPrivate: true }, true)?.scope).toBe('private')
    expect(decideStore(priv, { ...rules, allowPrivate: true }, false)).toBeUndefined()
  })
})

describe('isCacheableRequest', () => {
  it('accepts the six cacheable methods', () => {
    for (const m of [
      'server/discover',
      'tools/list',
      'prompts/list',
      'resources/list',
      'resources/templates/list',
      'resources/read',
    ]) {
      expect(isCacheableRequest(m, {})).toBe(true)
    }
  })

  it('refuses other methods and MRTR retries', () => {
    expect(isCacheableRequest('tools/call', {})).toBe(false)
    expect(isCacheableRequest('subscriptions/listen', {})).toBe(false)
    expect(isCacheableRequest(undefined, {})).toBe(false)
    expect(isCacheableRequest('resources/read', { uri: 'x', requestState: 's' })).toBe(false)
    expect(isCacheableRequest('tools/list', { inputResponses: {} })).toBe(false)
  })
})
