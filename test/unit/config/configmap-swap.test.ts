import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { describe, expect, it, onTestFinished } from 'vitest'
import { loadConfigFile, type LoadedConfig } from '../../../src/runtime/load.js'
import { watchConfig } from '../../../src/runtime/watch.js'
import type { PolicySet } from '../../../src/policy/policy.js'

const allowing = (tool: string): string =>
  `rules:\n  - name: allowed\n    servers: ["*"]\n    allow: { tools: ["${tool}"] }\n`
const configFor = (port: number): string =>
  `listen: { host: 127.0.0.1, port: 0 }\npolicies: ../policies\nservers:\n  app:\n    upstreams: [{ url: "http://127.0.0.1:${port}/mcp" }]\n`

/**
 * A ConfigMap volume as the kubelet writes it: the files live in a timestamped folder, `..data`
 * links to it, and each visible name links to `..data/<name>`. An update writes a new folder,
 * points a temporary link at it and renames that over `..data` (one atomic swap), then deletes
 * the old folder; the visible names never change.
 */
class ConfigMapVolume {
  private generation = 0
  private folder = ''

  constructor(
    readonly dir: string,
    files: Record<string, string>,
  ) {
    mkdirSync(dir)
    this.write(files)
    for (const name of Object.keys(files)) symlinkSync(join('..data', name), join(dir, name))
  }

  /** The kubelet's atomic update. */
  write(files: Record<string, string>): void {
    const old = this.folder
    this.folder = `..2026_11_30_16_00_00.00000000${++this.generation}`
    mkdirSync(join(this.dir, this.folder))
    for (const [name, text] of Object.entries(files))
      writeFileSync(join(this.dir, this.folder, name), text)
    symlinkSync(this.folder, join(this.dir, '..data_tmp'))
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'))
    if (old !== '') rmSync(join(this.dir, old), { recursive: true })
  }
}

function setup(): {
  config: ConfigMapVolume
  policies: ConfigMapVolume
  loaded: LoadedConfig
} {
  const root = mkdtempSync(join(tmpdir(), 'mcp-edge-configmap-'))
  onTestFinished(() => rmSync(root, { recursive: true, force: true }))
  const config = new ConfigMapVolume(join(root, 'config'), { 'gateway.yaml': configFor(1001) })
  const policies = new ConfigMapVolume(join(root, 'policies'), { 'main.yaml': allowing('a') })
  return { config, policies, loaded: loadConfigFile(join(root, 'config', 'gateway.yaml')) }
}

describe('hot reload from Kubernetes ConfigMap volumes (..data symlink swaps)', () => {
  it('loads only the visible policy files, not the ..data and timestamped folders', () => {
    const { loaded } = setup()
    expect(loaded.policy?.check(undefined, 'app', { kind: 'tool', name: 'a' }).allow).toBe(true)
  })

  it('sees a swap of the config volume and applies the new config', async () => {
    const { config, loaded } = setup()
    const applied: LoadedConfig[] = []
    const watcher = watchConfig({
      loaded,
      log: pino({ level: 'silent' }),
      applyConfig: (next) => Promise.resolve(void applied.push(next)),
      applyPolicy: () => expect.fail('the policies did not change'),
      pollMs: 20,
    })
    onTestFinished(() => watcher?.close())
    // Same length as before: only the swapped link (a new inode) tells the poll to look.
    config.write({ 'gateway.yaml': configFor(1002) })
    await expect.poll(() => applied.length).toBe(1)
    expect(applied[0]?.config.servers['app']?.upstreams[0]?.url).toBe('http://127.0.0.1:1002/mcp')
  })

  it('sees a swap of the policy volume and swaps in the new policies', async () => {
    const { policies, loaded } = setup()
    const swapped: (PolicySet | undefined)[] = []
    const watcher = watchConfig({
      loaded,
      log: pino({ level: 'silent' }),
      applyConfig: () => Promise.reject(new Error('the config did not change')),
      applyPolicy: (p) => void swapped.push(p),
      pollMs: 20,
    })
    onTestFinished(() => watcher?.close())
    policies.write({ 'main.yaml': allowing('b') })
    await expect.poll(() => swapped.length).toBe(1)
    expect(swapped[0]?.check(undefined, 'app', { kind: 'tool', name: 'b' }).allow).toBe(true)
    expect(swapped[0]?.check(undefined, 'app', { kind: 'tool', name: 'a' }).allow).toBe(false)
  })
})
