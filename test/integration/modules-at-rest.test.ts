import { spawnSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'

/**
 * Optional subsystems are loaded when a config turns them on, not when the gateway starts
 * (docs/design/hot-path.md §Memory at rest): ioredis and the OpenTelemetry SDK hold megabytes of
 * heap that a gateway without Redis or traces would carry for its whole life. Run in a child
 * process: the test runner's own module graph would hide what the gateway loads.
 */
const PROBE = `
import { createRequire } from 'node:module'
import { startGateway } from './src/server.ts'
const extra = JSON.parse(process.env.PROBE_CONFIG)
const config = {
  listen: { host: '127.0.0.1', port: 0 },
  servers: { a: { upstreams: [{ url: 'http://127.0.0.1:9/mcp' }] } },
  log: { level: 'silent' },
  ...extra,
}
const { configSchema } = await import('./src/config/schema.ts')
const gw = await startGateway({ config: configSchema.parse(config), file: undefined, dir: process.cwd() })
const loaded = Object.keys(createRequire(import.meta.url).cache)
const has = (pkg) => loaded.some((p) => p.includes('/node_modules/' + pkg + '/'))
process.stdout.write(JSON.stringify({
  ioredis: has('ioredis'),
  otelSdk: has('@opentelemetry/sdk-trace-base'),
  otlpExporter: has('@opentelemetry/exporter-trace-otlp-http'),
}))
await gw.close()
process.exit(0)
`

function probe(extra: Record<string, unknown>): Record<string, boolean> {
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', PROBE], {
    cwd: process.cwd(),
    env: { ...process.env, PROBE_CONFIG: JSON.stringify(extra) },
    encoding: 'utf8',
    timeout: 30_000,
  })
  expect(r.stderr).toBe('')
  return JSON.parse(r.stdout) as Record<string, boolean>
}

describe('modules loaded at start-up', () => {
  it('leaves ioredis and the OpenTelemetry SDK unloaded when no config asks for them', () => {
    expect(probe({ cache: {} })).toEqual({ ioredis: false, otelSdk: false, otlpExporter: false })
  })

  it('loads each once the config turns it on', () => {
    const loaded = probe({
      cache: { redis: 'redis://127.0.0.1:9' },
      telemetry: { otlp: { endpoint: 'http://127.0.0.1:9' } },
    })
    expect(loaded).toEqual({ ioredis: true, otelSdk: true, otlpExporter: true })
  })
})
