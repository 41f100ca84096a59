import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/errors.js'
import { classify, type ClassifyPolicy } from '../../../src/mcp/classify.js'
import {
  CACHEABLE_METHODS,
  RESULT_OBJECTS,
  URI_KEYED_METHODS,
  URI_TARGETS,
  isKnownMethod,
} from '../../../src/mcp/methods.js'
import { readRequestHead } from '../../../src/mcp/request-head.js'
import { enclosingSkills } from '../../../src/mcp/skill-paths.js'

const MODERN = '2026-07-28'
const policy: ClassifyPolicy = {
  parseAlways: true,
  parseMethods: new Set(),
  allowLegacy: true,
  maxDepth: 64,
  judgesArguments: false,
}
const head = (h: Record<string, string>) => readRequestHead(Object.entries(h).flat())
const modern = (method: string, name?: string) =>
  head({
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...(name === undefined ? {} : { 'mcp-name': name }),
  })
const body = (method: string, params: Record<string, unknown>, version = MODERN) =>
  Buffer.from(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method,
      params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': version } },
    }),
  )
function reason(fn: () => unknown): string | undefined {
  try {
    fn()
    return undefined
  } catch (err) {
    if (err instanceof GatewayError) return err.code
    throw err
  }
}

describe('the skills extension in the method table', () => {
  it('knows its three methods in both eras', () => {
    for (const era of ['modern', 'legacy'] as const)
      for (const m of ['skills/list', 'skills/get', 'resources/directory/read'])
        expect(isKnownMethod(era, m), `${era} ${m}`).toBe(true)
  })

  it('caches skills/list and skills/get (CacheableResult), never a directory read', () => {
    expect(CACHEABLE_METHODS.has('skills/list')).toBe(true)
    expect(CACHEABLE_METHODS.has('skills/get')).toBe(true)
    expect(CACHEABLE_METHODS.has('resources/directory/read')).toBe(false)
    expect({ ...RESULT_OBJECTS }).toEqual({ 'skills/get': 'skill' })
    expect([...URI_KEYED_METHODS].sort()).toEqual(['resources/read', 'skills/get'])
    expect(Object.fromEntries(URI_TARGETS)).toEqual({
      'skills/get': 'skill',
      'resources/directory/read': 'directory',
    })
  })
})

describe('classify: what a skills request names', () => {
  it('skills/get names the skill by its SKILL.md URI, from the body (no Mcp-Name needed)', () => {
    const uri = 'skill://acme/billing/refunds/SKILL.md'
    const info = classify(modern('skills/get'), body('skills/get', { uri }), policy)
    expect(info.targets).toEqual([{ kind: 'skill', name: uri }])
  })

  it('resources/directory/read names a resource read as a directory', () => {
    const uri = 'skill://pdf/templates'
    const method = 'resources/directory/read'
    const info = classify(modern(method), body(method, { uri }), policy)
    expect(info.targets).toEqual([{ kind: 'resource', uri, directory: true }])
  })

  it('names them for a 2025-era client too', () => {
    const info = classify(
      head({ 'mcp-protocol-version': '2025-11-25' }),
      body('skills/get', { uri: 'skill://a/SKILL.md' }, '2025-11-25'),
      policy,
    )
    expect(info.targets).toEqual([{ kind: 'skill', name: 'skill://a/SKILL.md' }])
  })

  it('refuses a request without a URI, and an Mcp-Name that names another', () => {
    expect(reason(() => classify(modern('skills/get'), body('skills/get', {}), policy))).toBe(
      'invalid_params',
    )
    const method = 'resources/directory/read'
    expect(reason(() => classify(modern(method), body(method, { uri: 5 }), policy))).toBe(
      'invalid_params',
    )
    expect(
      reason(() =>
        classify(
          modern('skills/get', 'skill://allowed/SKILL.md'),
          body('skills/get', { uri: 'skill://secret/SKILL.md' }),
          policy,
        ),
      ),
    ).toBe('header_mismatch')
  })

  it('skills/list takes no target', () => {
    expect(classify(modern('skills/list'), body('skills/list', {}), policy).targets).toEqual([])
  })
})

describe('enclosingSkills: the skills a resource may belong to', () => {
  it.each([
    ['skill://refunds/SKILL.md', false, ['skill://refunds/SKILL.md']],
    [
      'skill://acme/billing/refunds/examples/email.md',
      false,
      [
        'skill://acme/SKILL.md',
        'skill://acme/billing/SKILL.md',
        'skill://acme/billing/refunds/SKILL.md',
        'skill://acme/billing/refunds/examples/SKILL.md',
      ],
    ],
    ['skill://pdf/templates', true, ['skill://pdf/SKILL.md', 'skill://pdf/templates/SKILL.md']],
    ['skill://pdf/', true, ['skill://pdf/SKILL.md']],
    ['skill://pdf', true, ['skill://pdf/SKILL.md']],
    ['skill://pdf', false, []],
    [
      'github://o/r/skills/x/SKILL.md?ref=1#top',
      false,
      [
        'github://o/SKILL.md',
        'github://o/r/SKILL.md',
        'github://o/r/skills/SKILL.md',
        'github://o/r/skills/x/SKILL.md',
      ],
    ],
    ['file:///etc/passwd', false, ['file:///etc/SKILL.md']],
    ['docs://readme', false, []],
    ['no-scheme/a/b', false, []],
  ])('%s (directory: %s)', (uri, directory, expected) => {
    expect(enclosingSkills(uri, directory)).toEqual(expected)
  })

  it('gives up beyond 32 directories rather than cost a lookup per segment', () => {
    expect(enclosingSkills(`skill://${'a/'.repeat(32)}x`)?.length).toBe(32)
    expect(enclosingSkills(`skill://${'a/'.repeat(33)}x`)).toBeUndefined()
    expect(enclosingSkills(`skill://${'a/'.repeat(31)}a`, true)?.length).toBe(32)
    expect(enclosingSkills(`skill://${'a/'.repeat(32)}a`, true)).toBeUndefined()
  })
})
