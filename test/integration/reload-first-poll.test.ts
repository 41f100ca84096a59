import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { describe, expect, it, onTestFinished } from 'vitest'
import { loadConfigFile } from '../../src/runtime/load.js'
import { watchConfig } from '../../src/runtime/watch.js'

/**
 * The watcher's first look (runtime/watch.ts): files untouched since well before the gateway read
 * them are not read again, so a start does not load a large policy folder twice; files written
 * shortly before (or after) the read are. Whether a read happens shows here through the config's
 * environment: the variable the start read the config with is gone, so a read is a rejected reload.
 */

const VARIABLE = 'MCP_EDGE_FIRST_POLL_UPSTREAM'

function start(readLater: boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-first-poll-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  const config = join(dir, 'gateway.yaml')
  writeFileSync(
    config,
    `listen: { host: 127.0.0.1, port: 0 }\npolicies: ./policies\nservers:\n  app:\n    upstreams: [{ url: "\${${VARIABLE}}" }]\n`,
  )
  mkdirSync(join(dir, 'policies'))
  const policy = join(dir, 'policies', 'main.yaml')
  writeFileSync(policy, 'rules:\n  - { name: a, servers: ["*"], allow: { tools: [a] } }\n')
  const read = loadConfigFile(config, { ...process.env, [VARIABLE]: 'http://127.0.0.1:1/mcp' })
  // As if the start had read the files a minute after they were written (a change's ctime cannot
  // be set back, so the files stay new and the read moves).
  const loaded = readLater ? { ...read, readAt: Date.now() + 60_000 } : read
  const watcher = watchConfig({
    loaded,
    log: pino({ level: 'silent' }),
    applyConfig: () => Promise.reject(new Error('nothing changed')),
    applyPolicy: () => {
      throw new Error('nothing changed')
    },
    pollMs: 20,
  })
  if (watcher === undefined) throw new Error('a policy folder is always watched')
  onTestFinished(() => watcher.close())
  return watcher
}

describe("the watcher's first look", () => {
  it('reads files written just before the start again', async () => {
    const watcher = start(false)
    await expect.poll(() => watcher.warnings()).toHaveLength(1)
    expect(watcher.warnings()[0]).toContain(VARIABLE)
  })

  it('does not read files untouched since well before the start', async () => {
    const watcher = start(true)
    // Twenty poll intervals: a first look that read the files would have been refused by now.
    await new Promise((resolve) => setTimeout(resolve, 400))
    expect(watcher.warnings()).toEqual([])
    // The watcher still looks: a change is read (and refused for the same reason).
    await watcher.check()
    expect(watcher.warnings()[0]).toContain(VARIABLE)
  })
})
