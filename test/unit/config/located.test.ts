import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { closest } from '../../../src/config/did-you-mean.js'
import { renderLocated, type LocatedProblem } from '../../../src/config/located.js'
import { ConfigError, loadConfigFile } from '../../../src/runtime/load.js'

/**
 * Every kind of broken config and policy file names its file, line and column, and shows the
 * lines around the problem (config/located.ts), as `mcp-edge check` and `serve` print them.
 */

const SERVER = '  weather:\n    upstreams: [{ url: "http://127.0.0.1:9101/mcp" }]\n'

/** Writes a config (and policy files) to a fresh folder; the config file's path. */
function write(config: string, policies: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-located-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'policies'))
  for (const [name, text] of Object.entries(policies))
    writeFileSync(join(dir, 'policies', name), text)
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, config)
  return file
}

/** Writes a config (and policy files) to a fresh folder and returns what loading it refused. */
function refused(config: string, policies: Record<string, string> = {}): LocatedProblem[] {
  const file = write(config, policies)
  const dir = dirname(file)
  try {
    loadConfigFile(file, {})
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    // Paths shown relative to the working folder, as the loader shows policy files.
    return err.located.map((p) =>
      p.file === undefined ? p : { ...p, file: relative(dir, resolve(p.file)) },
    )
  }
  throw new Error('expected the config to be refused')
}

const at = (p: LocatedProblem | undefined) => [p?.at?.line, p?.at?.column]

describe('config problems with their place', () => {
  it('a YAML syntax error: line, column and the lines around it', () => {
    const [p, ...rest] = refused(`servers:\n${SERVER}    timeouts: { connectMs: 5\nlog: {}\n`)
    expect(rest).toEqual([])
    expect(p?.text).toMatch(/^yaml: .+ \(line \d+, column \d+\)$/)
    expect(p?.file).toMatch(/gateway\.yaml$/)
    expect(p?.frame).toContain('timeouts: { connectMs: 5')
  })

  it('aliases that cannot become values: refused at the alias, in the config and in policies', () => {
    // Before, toJS threw past the problem list (a ReferenceError, or a value containing itself).
    const [before] = refused(`servers:\n  weather: *w\n  other: &w { upstreams: [] }\n`)
    expect(before?.text).toBe('yaml: alias *w names no anchor before it (line 2, column 12)')
    expect(at(before)).toEqual([2, 12])
    const [loop] = refused(`servers:\n${SERVER}labels: &l { a: [*l] }\n`)
    expect(loop?.text).toBe('yaml: alias *l is inside the node it names (line 4, column 18)')
    const many = `x-list: &x [1]\nx-all: [${'*x, '.repeat(150)}1]\nservers:\n${SERVER}`
    const [bomb] = refused(many)
    expect(bomb?.text).toMatch(/^yaml: Excessive alias count .* \(line 2, column 9\)$/)
    const config = `policies: ./policies\nservers:\n${SERVER}`
    const [policy] = refused(config, {
      'a.yaml': 'rules:\n  - name: a\n    servers: *s\n    allow: { tools: [x] }\n',
    })
    expect(policy?.text).toBe(
      './policies/a.yaml: yaml: alias *s names no anchor before it (line 3, column 14)',
    )
    expect(at(policy)).toEqual([3, 14])
    // An alias that names an anchor before it, outside it, is read as ever.
    const fine = `servers:\n  weather: &w\n    upstreams: [{ url: "http://127.0.0.1:9101/mcp" }]\n  copy: *w\n`
    expect(() => loadConfigFile(write(fine), {})).not.toThrow()
  })

  it('a duplicate key: named, with where it first was', () => {
    const [p] = refused(`servers:\n${SERVER}${SERVER}`)
    expect(p?.text).toBe(
      'yaml: duplicate key "weather" (line 4, column 3; first at line 2, column 3)',
    )
    expect(at(p)).toEqual([4, 3])
    expect(renderLocated(p as LocatedProblem)).toBe(
      [
        `${p?.file}:4:3: yaml: duplicate key "weather" (first at line 2, column 3)`,
        '  3 |     upstreams: [{ url: "http://127.0.0.1:9101/mcp" }]',
        '> 4 |   weather:',
        '    |   ^^^^^^^',
      ].join('\n'),
    )
  })

  it('an unknown key: the key itself, and the known key closest to it', () => {
    const [p] = refused(`servers:\n${SERVER}    trustHeader: true\n`)
    expect(p?.text).toBe('servers.weather.trustHeader: unknown key (did you mean trustHeaders?)')
    expect(at(p)).toEqual([4, 5])
    expect(p?.frame?.split('\n').at(-1)).toBe('    |     ^^^^^^^^^^^')
    // Far from every known key: no guess.
    expect(refused(`servers:\n${SERVER}    colour: blue\n`)[0]?.text).toBe(
      'servers.weather.colour: unknown key',
    )
  })

  it('a wrong value: the value, under a server whose name holds a dot', () => {
    const [p] = refused(
      'servers:\n  api.v2:\n    upstreams: [{ url: "not a url" }]\n    timeouts: { connectMs: 0 }\n',
    )
    expect(p?.text).toBe('servers.api.v2.upstreams[0].url: invalid URL (http or https expected)')
    expect(at(p)).toEqual([3, 24])
    expect(p?.at?.length).toBe('"not a url"'.length)
  })

  it('a missing environment variable and a reference the schema cannot check: their keys', () => {
    const [env] = refused(`servers:\n${SERVER}    headers: { Authorization: "\${TOKEN}" }\n`)
    expect(env?.text).toBe(
      'servers.weather.headers.Authorization: environment variable TOKEN is not set',
    )
    expect(at(env)).toEqual([4, 31])
    const [scopes] = refused(`servers:\n${SERVER}    requiredScopes: [mcp]\n`)
    expect(scopes?.text).toBe('servers.weather.requiredScopes: needs auth to be configured')
    expect(at(scopes)).toEqual([4, 5])
  })

  it('policy files: a YAML error, an unknown key and a misspelt server, in their own file', () => {
    const config = `policies: ./policies\nservers:\n${SERVER}`
    const [yaml] = refused(config, { 'a.yaml': 'rules:\n  - name: a\n    name: b\n' })
    expect(yaml?.text).toBe(
      './policies/a.yaml: yaml: duplicate key "name" (line 3, column 5; first at line 2, column 5)',
    )
    expect(yaml?.file).toBe('policies/a.yaml')
    expect(at(yaml)).toEqual([3, 5])
    const [key] = refused(config, {
      'a.yaml':
        'rules:\n  - name: a\n    servers: [weather]\n    alow: { tools: [x] }\n    deny: { tools: [y] }\n',
    })
    expect(key?.text).toBe('./policies/a.yaml: rules[0].alow: unknown key (did you mean allow?)')
    expect(renderLocated(key as LocatedProblem).split('\n')[0]).toBe(
      'policies/a.yaml:4:5: rules[0].alow: unknown key (did you mean allow?)',
    )
    const [server] = refused(config, {
      'a.yaml': 'rules:\n  - name: a\n    servers: [wether]\n    allow: { tools: [x] }\n',
    })
    expect(server?.text).toBe(
      './policies/a.yaml rules[0].servers[0]: no server named "wether" in the config (did you mean weather?)',
    )
    expect(at(server)).toEqual([3, 15])
  })

  it('a condition that does not compile: the rule by name, and the place in the file', () => {
    const config = `policies: ./policies\nservers:\n${SERVER}`
    const rule = 'rules:\n  - name: analysts\n    servers: [weather]\n    allow: { tools: [x] }\n'
    const [quoted] = refused(config, { 'a.yaml': `${rule}    if: 'args.db == nope'\n` })
    expect(quoted?.text).toBe(
      './policies/a.yaml rules[0].if: column 12: undeclared reference to "nope" (rule "analysts")',
    )
    expect(at(quoted)).toEqual([5, 21])
    expect(quoted?.frame?.split('\n').slice(-2)).toEqual([
      "> 5 |     if: 'args.db == nope'",
      '    |                     ^',
    ])
    const [block] = refused(config, {
      'a.yaml': `${rule}    unless: |\n      args.db == "x" &&\n        zork > 2\n`,
    })
    expect(block?.text).toContain(
      'rules[0].unless: line 2, column 3: undeclared reference to "zork"',
    )
    expect(at(block)).toEqual([7, 9])
    expect(renderLocated(block as LocatedProblem).split('\n')[0]).toBe(
      'policies/a.yaml:7:9: rules[0].unless: rule "analysts": undeclared reference to "zork"',
    )
  })
})

describe('did you mean', () => {
  it.each([
    ['trustHeader', ['trustHeaders', 'timeouts'], 'trustHeaders'],
    ['alow', ['allow', 'deny'], 'allow'],
    ['MaxBodyBytes', ['maxBodyBytes'], 'maxBodyBytes'],
    ['helthCheck', ['healthCheck', 'headers'], 'healthCheck'],
    ['retires', ['retry', 'routes'], undefined],
    ['colour', ['card', 'clients', 'cache'], undefined],
    ['x', ['y'], undefined],
    ['tols', ['tools'], 'tools'],
  ])('%s among %j: %s', (word, candidates, expected) => {
    expect(closest(word, candidates)).toBe(expected)
  })
})
