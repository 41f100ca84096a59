import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { definitionDigest, modelView } from '../../../src/catalog/definition.js'
import { renderLock } from '../../../src/catalog/lock.js'
import { explainCommand } from '../../../src/cli/explain.js'

const FORECAST = { name: 'get_forecast', description: 'Forecast', inputSchema: { type: 'object' } }

/** A config with curation, pinning and a policy that names the backend's own names. */
function setup(pinning: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-explain-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  const pins = new Map([
    [
      'get_forecast',
      { digest: definitionDigest('tools', FORECAST), definition: modelView('tools', FORECAST) },
    ],
  ])
  const lock = {
    version: 1 as const,
    servers: new Map([['app', { tools: pins, prompts: new Map() }]]),
  }
  writeFileSync(join(dir, 'catalog.lock.yaml'), renderLock(lock))
  mkdirSync(join(dir, 'policies'))
  writeFileSync(
    join(dir, 'policies', 'main.yaml'),
    'rules:\n  - name: reads\n    servers: [app]\n    allow: { tools: ["get_*"] }\n',
  )
  const file = join(dir, 'gateway.yaml')
  writeFileSync(
    file,
    [
      'policies: policies',
      pinning,
      'servers:',
      '  app:',
      '    upstreams: [{ url: "http://127.0.0.1:1/mcp" }]',
      '    tools:',
      '      get_forecast: { name: forecast }',
      '      get_secret: { hidden: true }',
      'virtualServers:',
      '  all: { members: [app], prefix: always }',
      '',
    ].join('\n'),
  )
  return file
}

function explain(file: string, ...args: string[]): { code: number; out: string } {
  return explainOn('app', file, ...args)
}

function explainOn(server: string, file: string, ...args: string[]): { code: number; out: string } {
  let out = ''
  const io = { out: (t: string) => void (out += t), err: (t: string) => void (out += t) }
  const code = explainCommand(file, ['--server', server, ...args], io)
  return { code, out }
}

describe('mcp-edge explain with a catalog', () => {
  it('shows both names, judges the backend name, and shows the pin', () => {
    const file = setup('pinning: { lockFile: catalog.lock.yaml }')
    const curated = explain(file, '--tool', 'forecast')
    expect(curated.code).toBe(0)
    expect(curated.out).toContain('target: tool "get_forecast" on server "app"')
    expect(curated.out).toContain('catalog: tool "forecast" is the backend\'s "get_forecast"')
    expect(curated.out).toContain(`pin: ${definitionDigest('tools', FORECAST)}`)
    const json = JSON.parse(explain(file, '--tool', 'forecast', '--json').out) as Record<
      string,
      unknown
    >
    expect(json).toMatchObject({
      decision: 'allow',
      target: 'get_forecast',
      catalog: { exposed: 'forecast', backend: 'get_forecast', visible: true },
    })
  })

  it('an old, hidden or unpinned name is denied as unknown to clients', () => {
    const file = setup('pinning: { lockFile: catalog.lock.yaml, newTools: hide }')
    for (const name of ['get_forecast', 'get_secret']) {
      const r = explain(file, '--tool', name)
      expect(r.code).toBe(3)
      expect(r.out).toContain('unknown to clients')
    }
    const unpinned = explain(file, '--tool', 'get_alerts')
    expect(unpinned.code).toBe(3)
    expect(unpinned.out).toContain('not in the lock (newTools: hide')
  })

  it('through a virtual server: the prefix comes off, then the curation', () => {
    const file = setup('')
    const routed = explainOn('all', file, '--tool', 'app_forecast')
    expect(routed.code).toBe(0)
    expect(routed.out).toContain('target: tool "get_forecast" on server "app"')
    expect(explainOn('all', file, '--tool', 'app_get_forecast').code).toBe(3)
  })
})
