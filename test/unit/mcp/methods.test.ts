import { describe, expect, it } from 'vitest'
import {
  ALL_METHODS,
  BODY_TARGET_METHODS,
  CACHEABLE_METHODS,
  LIST_METHODS,
  RESULT_ARRAYS,
  CURATED_ANSWERS,
  CURATED_NAME_METHODS,
  NAME_PARAMS,
  NAMED_METHODS,
  RETRY_SAFE_METHODS,
  isKnownMethod,
  resemblesKnownMethod,
} from '../../../src/mcp/methods.js'
import { hasForbiddenNameCharacter, uriProblem } from '../../../src/mcp/names.js'

describe('the method table', () => {
  it('knows the 2026-07-28 client methods, exact case only', () => {
    for (const m of [
      'server/discover',
      'tools/list',
      'tools/call',
      'prompts/list',
      'prompts/get',
      'resources/list',
      'resources/templates/list',
      'resources/read',
      'completion/complete',
      'subscriptions/listen',
      'tasks/get',
      'tasks/update',
      'tasks/cancel',
      'notifications/cancelled',
    ]) {
      expect(isKnownMethod('modern', m), m).toBe(true)
    }
    for (const m of [
      'initialize',
      'ping',
      'logging/setLevel',
      'resources/subscribe',
      'TOOLS/CALL',
      'tools//call',
      'x-vendor/exec',
      'constructor',
      '',
    ]) {
      expect(isKnownMethod('modern', m), m).toBe(false)
    }
  })

  it('knows the 2025-era client methods', () => {
    for (const m of [
      'initialize',
      'notifications/initialized',
      'ping',
      'logging/setLevel',
      'resources/subscribe',
      'resources/unsubscribe',
      'tools/call',
      'tasks/get',
      'tasks/list',
      'tasks/result',
      'tasks/cancel',
      'notifications/cancelled',
      'notifications/progress',
      'notifications/roots/list_changed',
    ]) {
      expect(isKnownMethod('legacy', m), m).toBe(true)
    }
    for (const m of ['server/discover', 'subscriptions/listen', 'tasks/update', 'Tools/Call']) {
      expect(isKnownMethod('legacy', m), m).toBe(false)
    }
  })

  it('derives every other method list from one table', () => {
    expect(Object.fromEntries(NAMED_METHODS)).toEqual({
      'tools/call': 'tool',
      'prompts/get': 'prompt',
      'resources/read': 'resource',
    })
    expect({ ...LIST_METHODS }).toEqual({
      'tools/list': { key: 'tools', field: 'name' },
      'prompts/list': { key: 'prompts', field: 'name' },
      'resources/list': { key: 'resources', field: 'uri' },
      'resources/templates/list': { key: 'resourceTemplates', field: 'uriTemplate' },
      'events/list': { key: 'events', field: 'name' },
      'skills/list': { key: 'skills', field: 'uri' },
    })
    expect(LIST_METHODS['constructor']).toBeUndefined()
    expect(Object.fromEntries(NAME_PARAMS)).toEqual({
      'tools/call': { kind: 'tool', field: 'name' },
      'prompts/get': { kind: 'prompt', field: 'name' },
      'resources/read': { kind: 'resource', field: 'uri' },
      'events/poll': { kind: 'event', field: 'name' },
      'events/stream': { kind: 'event', field: 'name' },
      'events/subscribe': { kind: 'event', field: 'name' },
      'events/unsubscribe': { kind: 'event', field: 'name' },
    })
    expect({ ...CURATED_ANSWERS }).toEqual({
      'server/discover': 'instructions',
      'tools/list': 'tools',
      'prompts/list': 'prompts',
      'skills/list': 'skills',
      'skills/get': 'skills',
      initialize: 'instructions',
    })
    expect(CURATED_ANSWERS['constructor']).toBeUndefined()
    expect({ ...RESULT_ARRAYS }).toEqual({
      'server/discover': 'supportedVersions',
      'tools/list': 'tools',
      'prompts/list': 'prompts',
      'resources/list': 'resources',
      'resources/templates/list': 'resourceTemplates',
      'resources/read': 'contents',
      'skills/list': 'skills',
    })
    expect(RESULT_ARRAYS['constructor']).toBeUndefined()
    expect([...CURATED_NAME_METHODS].sort()).toEqual([
      'completion/complete',
      'prompts/get',
      'tools/call',
    ])
    expect([...CACHEABLE_METHODS].sort()).toEqual([
      'prompts/list',
      'resources/list',
      'resources/read',
      'resources/templates/list',
      'server/discover',
      'skills/get',
      'skills/list',
      'tools/list',
    ])
    expect([...RETRY_SAFE_METHODS].sort()).toEqual(
      [
        ...CACHEABLE_METHODS,
        'completion/complete',
        'prompts/get',
        'tasks/get',
        'events/list',
        'resources/directory/read',
      ].sort(),
    )
    expect(RETRY_SAFE_METHODS.has('tools/call')).toBe(false)
    expect([...BODY_TARGET_METHODS].sort()).toEqual([
      'completion/complete',
      'events/poll',
      'events/stream',
      'events/subscribe',
      'events/unsubscribe',
      'resources/directory/read',
      'resources/subscribe',
      'skills/get',
      'subscriptions/listen',
    ])
    for (const m of CACHEABLE_METHODS) expect(ALL_METHODS.has(m)).toBe(true)
  })

  it.each([
    'TOOLS/CALL',
    'tools//call',
    'Tools.Call',
    'tools/call ',
    'tools_call',
    'Resources/Subscribe',
  ])('%j resembles a protocol method, so extraMethods can never admit it', (m) =>
    expect(resemblesKnownMethod(m)).toBe(true),
  )

  it.each(['x-vendor/exec', 'acme/reindex'])('%j is a method of its own', (m) => {
    expect(resemblesKnownMethod(m)).toBe(false)
  })
})

describe('names and URIs', () => {
  it.each([
    'a\u0000',
    'a\u001f',
    'a\u007f',
    'a\u0080',
    'a\u009f',
    'a\ud800',
    '\udfffa',
    'a\u202a',
    'a\u202e',
    'a\u2066',
    'a\u2069',
    'a\u200e',
    'a\u200f',
    'a\u061c',
  ])('forbids %j in a name', (name) => expect(hasForbiddenNameCharacter(name)).toBe(true))

  it.each(['echo', 'get_forecast', 'Zürich', '😀', 'search\u200b', 'a b', 'a\u00a0b'])(
    'allows %j in a name',
    (name) => {
      expect(hasForbiddenNameCharacter(name)).toBe(false)
    },
  )

  it.each([
    'file:///projects/app/../../etc/passwd',
    'file:///projects/app/./x',
    'file:///projects/app/..',
    'docs://..',
    'file:..',
    './x',
    'file:///projects/app/%2e%2e/etc',
    'file:///projects/app/%2E%2E/etc',
    'file:///projects/app%2f..%2fetc',
    'file:///projects/app/x%2F',
    'file:///projects/app/..%5cetc',
    'file:///projects/app/..\\etc',
    'file:///projects/app/x?y=/../z',
    'file:///projects/app/.env%00.txt',
    'file:///projects/app/x%0a',
    'file:///projects/app/x%7F',
    'file:///projects/app/x\u0000y',
    'file:///projects/app/x\ny',
  ])('refuses %s as not normal', (uri) => {
    expect(uriProblem(uri)).toBeDefined()
  })

  it.each([
    'file:///projects/app/x',
    'file:///projects/app/.env',
    'file:///projects/app/...',
    'file:///projects/app/a..b',
    'docs://pages/{name}',
    'weather://Berlin/today',
    'file:///projects/app/%20space',
    'config://app?v=1.2#x',
  ])('accepts %s', (uri) => {
    expect(uriProblem(uri)).toBeUndefined()
  })
})
