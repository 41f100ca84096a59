import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadConfigFile, parseConfigText } from '../../../src/runtime/load.js'

/** A policy folder for the production-shaped examples (they front only `weather`). */
const policies = mkdtempSync(join(tmpdir(), 'mcp-edge-policies-'))
writeFileSync(
  join(policies, 'main.yaml'),
  'rules:\n  - { name: reads, servers: [weather], allow: { tools: ["get_*"] } }\n',
)

/** Every config the repository ships must load, so the docs and deploy examples never rot. */
describe('shipped configs', () => {
  it('the embedded default (npm start) loads, with its policies', () => {
    const { config } = loadConfigFile('deploy/gateway.demo.yaml', {})
    expect(Object.keys(config.servers)).toEqual(['weather', 'docs', 'ci'])
    expect(config.virtualServers.workspace?.members).toEqual(['weather', 'docs'])
    expect(config.policies).toBe('../policies')
  })

  it('the production example loads once its secrets and paths exist', () => {
    const text = readFileSync('deploy/gateway.example.yaml', 'utf8').replace(
      '/etc/mcp-edge/policies',
      policies,
    )
    const { config } = parseConfigText(text, {
      dir: resolve('deploy'),
      env: { WEATHER_TOKEN: 't' },
    })
    expect(config.servers.weather?.headers).toEqual({ Authorization: 'Bearer t' })
  })

  it.each(['base/gateway.yaml', 'overlays/ha-redis/gateway.yaml'])(
    'the Kubernetes ConfigMap file deploy/kubernetes/%s is a valid config',
    (file) => {
      const text = readFileSync(`deploy/kubernetes/${file}`, 'utf8').replace(
        '/etc/mcp-edge/policies',
        policies,
      )
      const env = { WEATHER_TOKEN: 't', REDIS_PASSWORD: 'p', MCP_EDGE_ADMIN_TOKEN: 'a'.repeat(32) }
      expect(() => parseConfigText(text, { dir: resolve('deploy'), env })).not.toThrow()
    },
  )
})
