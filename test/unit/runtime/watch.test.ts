import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { Writes } from '../../../src/policy/copy-on-write.js'
import type { PolicySet } from '../../../src/policy/policy.js'
import { loadConfigFile } from '../../../src/runtime/load.js'
import { watchConfig } from '../../../src/runtime/watch.js'

const POLL_MS = 20
const allowing = (tool: string): string =>
  `rules:\n  - name: allowed\n    servers: ["*"]\n    allow: { tools: ["${tool}"] }\n`

/** A logger at debug level whose lines' messages land in `messages`. */
function recorded(): { log: pino.Logger; messages: string[] } {
  const messages: string[] = []
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line !== '') messages.push((JSON.parse(line) as { msg: string }).msg)
      done()
    },
  })
  return { log: pino({ level: 'debug' }, sink), messages }
}

describe('the config watcher', () => {
  it('reads an edit once when SIGHUP follows it, not again at the next poll', async () => {
    const root = mkdtempSync(join(tmpdir(), 'mcp-edge-watch-'))
    onTestFinished(() => rmSync(root, { recursive: true, force: true }))
    mkdirSync(join(root, 'policies'))
    writeFileSync(join(root, 'policies', 'main.yaml'), allowing('a'))
    writeFileSync(
      join(root, 'gateway.yaml'),
      'listen: { host: 127.0.0.1, port: 0 }\npolicies: policies\nservers:\n  app:\n    upstreams: [{ url: "http://127.0.0.1:1001/mcp" }]\n',
    )
    const { log, messages } = recorded()
    const swapped: (PolicySet | undefined)[] = []
    const watcher = watchConfig({
      loaded: loadConfigFile(join(root, 'gateway.yaml')),
      log,
      applyConfig: () => Promise.reject(new Error('the config did not change')),
      applyPolicy: (p) => void swapped.push(p),
      pollMs: POLL_MS,
    })
    onTestFinished(() => watcher?.close())
    // A SIGHUP before any edit reads the files as they are: from here on, the watcher has seen
    // them, whenever its first poll comes (that poll reads files written moments before a start
    // again, test/integration/reload-first-poll.test.ts).
    await watcher?.check()
    expect(messages).toContain('config read again, nothing changed')
    messages.length = 0

    writeFileSync(join(root, 'policies', 'main.yaml'), allowing('b'))
    await watcher?.check()
    expect(swapped).toHaveLength(1)
    expect(swapped[0]?.check(undefined, 'app', { kind: 'tool', name: 'b' }).allow).toBe(true)
    // Ten polls later the edit has not been read a second time.
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * 10))
    expect(messages.filter((m) => m.startsWith('config read again'))).toEqual([])
    expect(messages.filter((m) => m === 'config reloaded')).toHaveLength(1)

    // An edit after that is still seen by the poll.
    writeFileSync(join(root, 'policies', 'main.yaml'), allowing('c'))
    await expect.poll(() => swapped.length).toBe(2)
  })

  it('takes the rules an edit left as they were from the running policy', async () => {
    const root = mkdtempSync(join(tmpdir(), 'mcp-edge-watch-'))
    onTestFinished(() => rmSync(root, { recursive: true, force: true }))
    mkdirSync(join(root, 'policies'))
    // Over 64 KiB, so a reload reads it on the worker, as a large folder is.
    const many = (last: string): string => {
      const lines = ['rules:']
      for (let i = 0; i < 1000; i++)
        lines.push(`  - { name: team-${i}, servers: [app], allow: { tools: ["t${i}_*"] } }`)
      return `${lines.join('\n')}\n  - { name: last, servers: [app], allow: { tools: ["${last}"] } }\n`
    }
    writeFileSync(join(root, 'policies', 'main.yaml'), many('a'))
    writeFileSync(
      join(root, 'gateway.yaml'),
      'listen: { host: 127.0.0.1, port: 0 }\npolicies: policies\nservers:\n  app:\n    upstreams: [{ url: "http://127.0.0.1:1001/mcp" }]\n',
    )
    const loaded = loadConfigFile(join(root, 'gateway.yaml'))
    const swapped: (PolicySet | undefined)[] = []
    const watcher = watchConfig({
      loaded,
      log: recorded().log,
      applyConfig: () => Promise.reject(new Error('the config did not change')),
      applyPolicy: (p) => void swapped.push(p),
      pollMs: 60_000,
    })
    onTestFinished(() => watcher?.close())
    writeFileSync(join(root, 'policies', 'main.yaml'), many('b'))
    await watcher?.check()
    const [running, next] = [loaded.policy?.rules ?? [], swapped[0]?.rules ?? []]
    expect(next).toHaveLength(1001)
    expect(next.slice(0, 1000).every((r, i) => r === running[i])).toBe(true)
    expect(next[1000]).not.toBe(running[1000])
    expect(swapped[0]?.check(undefined, 'app', { kind: 'tool', name: 'b' }).allow).toBe(true)
    expect(swapped[0]?.check(undefined, 'app', { kind: 'tool', name: 'a' }).allow).toBe(false)

    // A second edit, of a rule in the middle too, against the policy the first one swapped in
    // (the reader's own last read: named, not listed): the index is patched, not built.
    writeFileSync(join(root, 'policies', 'main.yaml'), many('c').replace('"t500_*"', '"u500_*"'))
    const patches = vi.spyOn(Writes, 'patch')
    onTestFinished(() => patches.mockRestore())
    await watcher?.check()
    expect(patches).toHaveBeenCalledTimes(1)
    const [before, after] = [swapped[0], swapped[1]]
    expect(after?.rules.filter((r, i) => r !== before?.rules[i]).map((r) => r.name)).toEqual([
      'team-500',
      'last',
    ])
    const tool = (name: string) => after?.check(undefined, 'app', { kind: 'tool', name }).allow
    expect([tool('u500_x'), tool('t500_x'), tool('t499_x'), tool('c'), tool('b')]).toEqual([
      true,
      false,
      true,
      true,
      false,
    ])
    // The running group was copied, not changed: the first policy decides as it did.
    expect(after?.index.own.get('app')).not.toBe(before?.index.own.get('app'))
    expect(before?.check(undefined, 'app', { kind: 'tool', name: 't500_x' }).allow).toBe(true)
    expect(before?.check(undefined, 'app', { kind: 'tool', name: 'u500_x' }).allow).toBe(false)
  })
})
