import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  ConfigError,
  loadConfigFile,
  loadConfigFileBeside,
  parseConfigText,
} from '../../../src/runtime/load.js'

const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-config-'))

function problems(text: string, env: NodeJS.ProcessEnv = {}): readonly string[] {
  try {
    parseConfigText(text, { dir, env })
    return []
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
}

describe('config loading', () => {
  it('fills defaults and freezes the result', () => {
    const { config } = parseConfigText(
      'servers:\n  weather:\n    upstreams: [{url: "http://127.0.0.1:9101/mcp"}]\n',
      { dir },
    )
    expect(config.listen).toEqual({ host: '127.0.0.1', port: 8080 })
    expect(config.servers.weather?.trustHeaders).toBe(false)
    expect(config.servers.weather?.timeouts).toEqual({
      connectMs: 2000,
      responseHeadersMs: 30000,
      streamIdleMs: 300000,
    })
    expect(config.limits.maxBodyBytes).toBe(1048576)
    expect(Object.isFrozen(config.servers.weather?.upstreams)).toBe(true)
  })

  it('names the path of every problem at once', () => {
    const text = [
      'listen: {port: "x"}',
      'servers:',
      '  weather:',
      '    upstreams: [{url: "not a url"}]',
      '    timeouts: {connectMs: -1}',
      '    colour: blue',
      '  "bad name":',
      '    upstreams: [{url: "http://x/mcp"}]',
    ].join('\n')
    expect(problems(text)).toEqual(
      expect.arrayContaining([
        'listen.port: Invalid input: expected number, received string',
        'servers.weather.upstreams[0].url: invalid URL (http or https expected)',
        'servers.weather.timeouts.connectMs: Too small: expected number to be >0',
        'servers.weather.colour: unknown key',
        expect.stringMatching(/^servers\.bad name: server names are/),
      ]),
    )
  })

  it('substitutes ${ENV} and reports a missing variable with its path', () => {
    const text =
      'servers:\n  w:\n    upstreams: [{url: "http://x/mcp"}]\n    headers: {Authorization: "Bearer ${TOKEN}"}\n'
    const { config } = parseConfigText(text, { dir, env: { TOKEN: 's3cret' } })
    expect(config.servers.w?.headers).toEqual({ Authorization: 'Bearer s3cret' })
    expect(problems(text)).toEqual([
      'servers.w.headers.Authorization: environment variable TOKEN is not set',
    ])
    expect(
      parseConfigText(text.replace('${TOKEN}', '${TOKEN:-dev}'), { dir, env: {} }).config.servers.w
        ?.headers,
    ).toEqual({
      Authorization: 'Bearer dev',
    })
  })

  it('rejects duplicate YAML keys, dangling references and empty server lists', () => {
    expect(
      problems('servers:\n  a:\n    upstreams: [{url: "http://x"}]\n  a:\n    upstreams: []\n')[0],
    ).toMatch(/^yaml: /)
    expect(
      problems('policies: ./nowhere\nservers:\n  a:\n    upstreams: [{url: "http://x"}]\n'),
    ).toEqual(['policies: folder ./nowhere not found'])
    expect(problems('servers: {}\n')).toEqual(['servers: at least one server is required'])
    expect(
      problems('servers:\n  a:\n    upstreams: [{url: "http://x"}]\n    requiredScopes: [s]\n'),
    ).toEqual(['servers.a.requiredScopes: needs auth to be configured'])
  })

  it('reads a file and reports an unreadable one', () => {
    const file = join(dir, 'gw.yaml')
    writeFileSync(file, 'servers:\n  a:\n    upstreams: [{url: "http://x/mcp"}]\n')
    expect(loadConfigFile(file, {}).dir).toBe(dir)
    expect(() => loadConfigFile(join(dir, 'missing.yaml'))).toThrow(ConfigError)
  })
})

describe('a reload of an unchanged config file', () => {
  it('gets a config of its own, and still checks what the config refers to', async () => {
    const root = mkdtempSync(join(tmpdir(), 'mcp-edge-again-'))
    mkdirSync(join(root, 'policies'))
    writeFileSync(join(root, 'policies', 'main.yaml'), 'rules: []\n')
    const file = join(root, 'gateway.yaml')
    writeFileSync(
      file,
      'policies: policies\nservers:\n  app:\n    upstreams: [{url: "http://127.0.0.1:9101/mcp"}]\n',
    )
    const first = await loadConfigFileBeside(file)
    const second = await loadConfigFileBeside(file)
    expect(second.config).toEqual(first.config)
    expect(second.config).not.toBe(first.config)
    expect(Object.isFrozen(second.config.servers)).toBe(true)
    // The text is the same; the folder it names is gone.
    rmSync(join(root, 'policies'), { recursive: true })
    await expect(loadConfigFileBeside(file)).rejects.toThrow(ConfigError)
    // A changed text is read anew.
    writeFileSync(file, 'servers:\n  app:\n    upstreams: [{url: "http://127.0.0.1:9102/mcp"}]\n')
    const third = await loadConfigFileBeside(file)
    expect(third.config.servers['app']?.upstreams[0]?.url).toBe('http://127.0.0.1:9102/mcp')
    expect(third.config.policies).toBeUndefined()
  })
})
