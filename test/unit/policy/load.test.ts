import { symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadPolicySet, PolicyError } from '../../../src/policy/load.js'
import { tempFolder } from './fixtures.js'

const SERVERS = ['weather', 'docs']

function load(files: Record<string, string>, servers = SERVERS) {
  return loadPolicySet({ folder: tempFolder(files), label: 'policies', mode: 'enforce', servers })
}

function problems(files: Record<string, string>): readonly string[] {
  try {
    load(files)
  } catch (err) {
    if (err instanceof PolicyError) return err.problems
    throw err
  }
  throw new Error('expected the policies to be rejected')
}

const OK = 'rules:\n  - { name: a, servers: [weather], allow: { tools: [get_forecast] } }\n'

describe('policy folder loading', () => {
  it('loads every .yaml and .yml file in name order, and nothing else', () => {
    const set = load({
      'b.yml': 'rules: [{ name: b, servers: ["*"], deny: { tools: ["delete_*"] } }]',
      'a.yaml': OK,
      'notes.txt': 'not a policy',
      '.a.yaml.swp': 'garbage: [',
      'examples/extra.yaml': 'rules: [{ name: sub, servers: ["*"], allow: { tools: ["*"] } }]',
    })
    expect(set.rules.map((r) => [r.name, r.source])).toEqual([
      ['a', 'policies/a.yaml rules[0]'],
      ['b', 'policies/b.yml rules[0]'],
    ])
  })

  it('follows symlinked files (Kubernetes ConfigMap volumes)', () => {
    const dir = tempFolder({ '..data/a.yaml': OK })
    symlinkSync(join(dir, '..data/a.yaml'), join(dir, 'a.yaml'))
    const set = loadPolicySet({ folder: dir, label: 'p', mode: 'enforce', servers: SERVERS })
    expect(set.rules.map((r) => r.name)).toEqual(['a'])
  })

  it.each([
    [
      'unknown top-level key',
      'rules: []\nrule: []\n',
      'policies/x.yaml: rule: unknown key (did you mean rules?)',
    ],
    [
      'unknown rule key',
      'rules:\n  - { name: a, servers: [weather], alow: { tools: [x] }, allow: { tools: [y] } }\n',
      'policies/x.yaml: rules[0].alow: unknown key (did you mean allow?)',
    ],
    [
      'unknown kind',
      'rules:\n  - { name: a, servers: [weather], allow: { tool: [x] } }\n',
      'policies/x.yaml: rules[0].allow.tool: unknown key (did you mean tools?)',
    ],
    [
      'unknown when key',
      'rules:\n  - { name: a, servers: [weather], when: { claim: { g: x } }, allow: { tools: [x] } }\n',
      'policies/x.yaml: rules[0].when.claim: unknown key (did you mean claims?)',
    ],
    [
      'pattern that is not a string',
      'rules:\n  - { name: a, servers: [weather], allow: { tools: [get, 12] } }\n',
      'policies/x.yaml: rules[0].allow.tools[1]: Invalid input: expected string, received number',
    ],
    [
      'empty pattern',
      'rules:\n  - { name: a, servers: [weather], allow: { tools: [""] } }\n',
      'policies/x.yaml: rules[0].allow.tools[0]: a pattern cannot be empty',
    ],
    [
      'rule without allow or deny',
      'rules:\n  - { name: a, servers: [weather] }\n',
      'policies/x.yaml: rules[0]: a rule needs allow or deny',
    ],
    [
      'rule without servers',
      'rules:\n  - { name: a, allow: { tools: [x] } }\n',
      'policies/x.yaml: rules[0].servers: Invalid input: expected array, received undefined',
    ],
    [
      'bad mode',
      'rules:\n  - { name: a, mode: audit, servers: [weather], allow: { tools: [x] } }\n',
      'policies/x.yaml: rules[0].mode: Invalid option: expected one of "enforce"|"dry-run"',
    ],
    [
      'claims without any claim',
      'rules:\n  - { name: a, when: { claims: {} }, servers: [weather], allow: { tools: [x] } }\n',
      'policies/x.yaml: rules[0].when.claims: name at least one claim',
    ],
    ['empty file', '', 'policies/x.yaml: the file is empty (expected rules: [...])'],
    [
      'not a mapping',
      '- a\n- b\n',
      'policies/x.yaml: (root): Invalid input: expected object, received array',
    ],
    [
      'misspelt server',
      'rules:\n  - { name: a, servers: [wether], deny: { tools: ["delete_*"] } }\n',
      'policies/x.yaml rules[0].servers[0]: no server named "wether" in the config (did you mean weather?)',
    ],
  ])('rejects %s, naming file and path', (_what, text, expected) => {
    expect(problems({ 'x.yaml': text })).toContain(expected)
  })

  it('rejects duplicate YAML keys', () => {
    const p = problems({
      'x.yaml':
        'rules:\n  - name: a\n    name: b\n    servers: [weather]\n    allow: { tools: [x] }\n',
    })
    expect(p).toEqual([
      'policies/x.yaml: yaml: duplicate key "name" (line 3, column 5; first at line 2, column 5)',
    ])
  })

  it('rejects rule names used twice, across files', () => {
    expect(problems({ 'a.yaml': OK, 'b.yaml': OK })).toEqual([
      'policies/b.yaml rules[0].name: duplicate rule name "a" (also policies/a.yaml rules[0])',
    ])
  })

  it('reports every problem of every file at once', () => {
    const p = problems({
      'a.yaml': 'rules:\n  - { name: a, servers: [weather], alow: {} }\n',
      'b.yaml': 'rules: [',
      'c.yaml': OK,
    })
    expect(p.some((x) => x.startsWith('policies/a.yaml: rules[0].alow: unknown key'))).toBe(true)
    expect(
      p.some((x) => x.startsWith('policies/a.yaml: rules[0]: a rule needs allow or deny')),
    ).toBe(true)
    expect(p.some((x) => x.startsWith('policies/b.yaml: yaml:'))).toBe(true)
  })

  it('accepts an empty folder: nothing is allowed', () => {
    const set = load({})
    expect(set.rules).toEqual([])
    expect(set.check(undefined, 'weather', { kind: 'tool', name: 'x' }).allow).toBe(false)
  })

  it('gives the same id to the same rules and a new id when any rule changes', () => {
    const dir = tempFolder({ 'a.yaml': OK })
    const opts = { folder: dir, label: 'p', mode: 'enforce' as const, servers: SERVERS }
    const first = loadPolicySet(opts).id
    expect(loadPolicySet(opts).id).toBe(first)
    writeFileSync(join(dir, 'a.yaml'), OK.replace('get_forecast', 'get_alerts'))
    expect(loadPolicySet(opts).id).not.toBe(first)
    expect(loadPolicySet({ ...opts, mode: 'dry-run' }).id).not.toBe(first)
  })

  it('reports a missing folder', () => {
    expect(() =>
      loadPolicySet({
        folder: '/nonexistent/policies',
        label: 'policies',
        mode: 'enforce',
        servers: SERVERS,
      }),
    ).toThrow(/policies: ENOENT/)
  })
})
