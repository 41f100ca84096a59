import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseDocument } from 'yaml'
import { loadPolicySet, PolicyError } from '../../../src/policy/load.js'
import { quickYaml } from '../../../src/policy/quick-yaml.js'
import { tempFolder } from './fixtures.js'

/** What the `yaml` path of policy/load.ts reads. */
const slow = (text: string): unknown =>
  parseDocument(text, { uniqueKeys: true, prettyErrors: false }).toJS()

const policies = (dir: string): string[] =>
  readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .map((f) => readFileSync(join(dir, f), 'utf8'))

describe('quickYaml', () => {
  it('Should read the repository policies as yaml does', () => {
    const texts = [...policies('policies'), ...policies('policies/examples')]
    expect(texts.length).toBeGreaterThan(1)
    for (const text of texts) expect(quickYaml(text)).toEqual(slow(text))
  })

  it('Should resolve plain scalars by the YAML 1.2 core schema, as yaml does', () => {
    const scalars = [
      '1',
      '-12',
      '+7',
      '0o17',
      '0x1F',
      '1_000',
      '0b101',
      '017',
      '0o8',
      '-0x1',
      '1.5',
      '.5',
      '1.',
      '-1.5e3',
      '1e3',
      '+.inf',
      '-.Inf',
      '.NaN',
      '.nan',
      '1.5e',
      '1_0.5',
      'true',
      'True',
      'TRUE',
      'tRue',
      'yes',
      'no',
      'on',
      'off',
      'y',
      'null',
      'Null',
      'NULL',
      '~',
      'nULL',
      '',
      '2001-12-14',
      '12:30',
      '0',
      '-0',
      '00',
      "'1'",
      '"true"',
      '"~"',
    ]
    for (const s of scalars) {
      const text = `claims:\n  k: ${s}\nlist: [${s === '' ? '""' : s}]\n`
      expect(quickYaml(text), s).toEqual(slow(text))
    }
  })

  it('Should read block and flow styles, escapes and comments as yaml does', () => {
    const text = [
      '# a policy',
      'rules:',
      '  - name: "a\\tb \\u00e9"   # trailing comment',
      "    description: 'it''s'",
      '    servers: ["*", team-*]',
      '    when: { claims: { groups: [a, b], level: 3, admin: true } }',
      '    allow:',
      '      tools:',
      '        - get_*',
      '        - "*_forecast"',
      '    if: |',
      '      request.arguments.city',
      '        == "Paris"',
      '    unless: >-',
      '      folded',
      '      text',
    ].join('\n')
    expect(quickYaml(text)).toEqual(slow(text))
  })

  it('Should leave to yaml what it cannot read the same way', () => {
    const refused = {
      syntax: 'rules: [a\n',
      'duplicate key': 'a: 1\na: 2\n',
      'several documents': 'a: 1\n---\nb: 2\n',
      'a non-core tag': 'a: !!binary aGk=\n',
      'an anchored collection': 'x: &t [a, b]\ny: *t\n',
      'a null key': 'claims:\n  ~: x\n',
      'an empty key': 'claims:\n  "": x\n',
      'a plain null key': 'claims:\n  null: x\n',
    }
    for (const [what, text] of Object.entries(refused))
      expect(quickYaml(text), what).toBeUndefined()
  })

  it('Should read an anchored scalar, which yaml expands the same way', () => {
    const text = 'a: &v hello\nb: *v\n'
    expect(quickYaml(text)).toEqual(slow(text))
  })

  it('Should still place at its line and column a problem found after a quick read', () => {
    const folder = tempFolder({
      'a.yaml': 'rules:\n  - name: a\n    servers: [weather]\n    allow: { tools: [x] }\n',
      'b.yaml': 'rules:\n  - name: b\n    servers: [wether]\n    allow: { tools: [x] }\n',
    })
    let located: PolicyError['located'] = []
    try {
      loadPolicySet({ folder, label: 'policies', mode: 'enforce', servers: ['weather'] })
    } catch (err) {
      if (!(err instanceof PolicyError)) throw err
      located = err.located
    }
    expect(located).toHaveLength(1)
    expect(located[0]?.text).toMatch(
      /^policies\/b\.yaml rules\[0\]\.servers\[0\]: no server named "wether"/,
    )
    expect(located[0]?.at).toMatchObject({ line: 3, column: 15 })
    expect(located[0]?.frame).toContain('wether')
  })
})
