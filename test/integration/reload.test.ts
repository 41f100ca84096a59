import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { describe, expect, it, onTestFinished } from 'vitest'
import { loadConfigFile } from '../../src/config/load.js'
import { watchConfig } from '../../src/config/watch.js'
import type { PolicySet } from '../../src/policy/policy.js'
import { startGateway, type RunningGateway } from '../../src/server.js'
import { connectClient, mcpBody, mcpHeaders, rawPost, rawRequest } from '../helpers/clients.js'
import {
  startNonValidatingBackend,
  startSdkServer,
  type TestServer,
} from '../helpers/sdk-servers.js'

/** Hot reload (issue 3 item 6): policy and config edits apply within 2 s; broken ones are refused. */

const allowing = (...tools: string[]) =>
  `rules:\n  - name: allowed\n    servers: ["*"]\n    allow: { tools: [${tools.map((t) => JSON.stringify(t)).join(', ')}] }\n`

const configFor = (backend: string, extra = '') =>
  `listen: { host: 127.0.0.1, port: 0 }\npolicies: ./policies\n${extra}servers:\n  app:\n    upstreams: [{ url: "${backend}" }]\n`

interface Setup {
  readonly dir: string
  readonly gw: RunningGateway
  readonly logs: Record<string, unknown>[]
  write(path: string, text: string): void
}

async function start(backend: TestServer, rules: string, extra = ''): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-reload-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  const write = (path: string, text: string) => writeFileSync(join(dir, path), text)
  write('gateway.yaml', configFor(backend.url, extra))
  mkdirSync(join(dir, 'policies'))
  write('policies/main.yaml', rules)
  const logs: Record<string, unknown>[] = []
  const gw = await startGateway(loadConfigFile(join(dir, 'gateway.yaml')), {
    logDestination: {
      write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>),
    },
  })
  onTestFinished(() => gw.close(200))
  return { dir, gw, logs, write }
}

/** Status of a tools/call through the gateway: 'allowed' when the backend answered, 'denied' when policy did. */
async function attempt(gw: RunningGateway, name: string): Promise<'allowed' | 'denied'> {
  const res = await rawPost(
    `${gw.url}/mcp/app`,
    mcpBody('tools/call', { name, arguments: {} }),
    mcpHeaders('tools/call', name),
  )
  const body = res.json() as { error?: { message: string } }
  return body.error?.message === `Unknown tool: ${name}` ? 'denied' : 'allowed'
}

/** Polls `probe` until it returns `want`; resolves with the time it took, rejects after `ms`. */
async function within<T>(ms: number, want: T, probe: () => Promise<T>): Promise<number> {
  const start = performance.now()
  for (;;) {
    if ((await probe()) === want) return performance.now() - start
    if (performance.now() - start > ms) throw new Error(`not ${String(want)} within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

async function backend(): Promise<TestServer> {
  const b = await startNonValidatingBackend()
  onTestFinished(() => b.close())
  return b
}

/** /readyz: a rejected reload is a warning; the gateway stays ready on its last good config. */
async function readyz(gw: RunningGateway): Promise<{ status: number; problems: string[] }> {
  const res = await rawRequest('GET', `${gw.url}/readyz`)
  expect(res.status).toBe(200)
  return { status: res.status, problems: (res.json() as { warnings: string[] }).warnings }
}

describe('hot reload', () => {
  it('applies a policy edit within 2 seconds, without a restart', async () => {
    const { gw, write } = await start(await backend(), allowing('search'))
    expect(await attempt(gw, 'echo')).toBe('denied')
    write('policies/main.yaml', allowing('search', 'echo'))
    const took = await within(2000, 'allowed', () => attempt(gw, 'echo'))
    expect(took).toBeLessThan(2000)
    write(
      'policies/new.yaml',
      'rules: [{ name: no-echo, servers: ["*"], deny: { tools: [echo] } }]\n',
    )
    await within(2000, 'denied', () => attempt(gw, 'echo'))
  })

  it('keeps the previous policy on a broken edit, shows it on /readyz, and recovers on a fix', async () => {
    const { gw, write, logs } = await start(await backend(), allowing('search', 'echo'))
    expect(await readyz(gw)).toEqual({ status: 200, problems: [] })
    write(
      'policies/main.yaml',
      'rules:\n  - name: oops\n    servers: ["*"]\n    alow: { tools: ["*"] }\n',
    )
    await within(2000, 1, async () => (await readyz(gw)).problems.length)
    const { problems } = await readyz(gw)
    expect(problems).toHaveLength(1)
    expect(problems[0]).toContain('./policies/main.yaml: rules[0].alow: unknown key')
    expect(
      logs.some(
        (l) => l.msg === 'config reload rejected; keeping the previous config and policies',
      ),
    ).toBe(true)
    // the old rules are still in force
    expect(await attempt(gw, 'echo')).toBe('allowed')
    expect(await attempt(gw, 'delete_repo')).toBe('denied')
    write('policies/main.yaml', allowing('search'))
    await within(2000, 0, async () => (await readyz(gw)).problems.length)
    expect(await attempt(gw, 'echo')).toBe('denied')
  })

  it('reloads the config file too, and an invalid config keeps the running one', async () => {
    const b = await backend()
    const { gw, write } = await start(b, allowing('search'))
    expect(await attempt(gw, 'delete_repo')).toBe('denied')
    write('gateway.yaml', configFor(b.url, 'policyMode: dry-run\n'))
    await within(2000, 'allowed', () => attempt(gw, 'delete_repo'))
    write('gateway.yaml', configFor(b.url, 'policyMode: maybe\n'))
    await within(2000, 1, async () => (await readyz(gw)).problems.length)
    expect((await readyz(gw)).problems[0]).toContain('policyMode')
    expect(await attempt(gw, 'delete_repo')).toBe('allowed') // still dry run
  })

  it('keeps open listen streams across policy and config reloads', async () => {
    const server = await startSdkServer()
    onTestFinished(() => server.close())
    const { gw, write } = await start(server, allowing('get_*'))
    const client = await connectClient(`${gw.url}/mcp/app`)
    onTestFinished(() => client.close())
    let changes = 0
    client.setNotificationHandler('notifications/tools/list_changed', () => void changes++)
    const subscription = await client.listen({ toolsListChanged: true })
    onTestFinished(() => subscription.close())
    write('policies/main.yaml', allowing('get_*', 'whoami'))
    await within(2000, 'allowed', () => attempt(gw, 'whoami'))
    write('gateway.yaml', configFor(server.url, 'policyMode: dry-run\n'))
    await within(2000, 'allowed', () => attempt(gw, 'delete_station'))
    server.notify.toolsChanged()
    await within(2000, true, async () => changes === 1)
  })

  it('polls the policy folder and swaps in a changed policy', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-poll-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(join(dir, 'gateway.yaml'), configFor('http://127.0.0.1:1/mcp'))
    mkdirSync(join(dir, 'policies'))
    writeFileSync(join(dir, 'policies/main.yaml'), allowing('a'))
    const swapped: (PolicySet | undefined)[] = []
    const watcher = watchConfig({
      loaded: loadConfigFile(join(dir, 'gateway.yaml')),
      log: pino({ level: 'silent' }),
      applyConfig: () => Promise.reject(new Error('the config did not change')),
      applyPolicy: (p) => void swapped.push(p),
      pollMs: 200,
    })
    onTestFinished(() => watcher?.close())
    writeFileSync(join(dir, 'policies/main.yaml'), allowing('a', 'b'))
    await within(3000, 1, async () => swapped.length)
    expect(swapped[0]?.check(undefined, 'app', { kind: 'tool', name: 'b' }).allow).toBe(true)
  })
})

describe('re-reading on demand (SIGHUP)', () => {
  it('check() applies an edit at once, without waiting for the poll', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-hup-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(join(dir, 'gateway.yaml'), configFor('http://127.0.0.1:1/mcp'))
    mkdirSync(join(dir, 'policies'))
    writeFileSync(join(dir, 'policies/main.yaml'), allowing('a'))
    const swapped: (PolicySet | undefined)[] = []
    const watcher = watchConfig({
      loaded: loadConfigFile(join(dir, 'gateway.yaml')),
      log: pino({ level: 'silent' }),
      applyConfig: () => Promise.reject(new Error('the config did not change')),
      applyPolicy: (p) => void swapped.push(p),
      pollMs: 600_000, // the poll never runs during this test
    })
    onTestFinished(() => watcher?.close())
    await watcher?.check()
    expect(swapped).toHaveLength(0) // nothing changed yet
    writeFileSync(join(dir, 'policies/main.yaml'), allowing('a', 'b'))
    await watcher?.check()
    expect(swapped).toHaveLength(1)
    expect(swapped[0]?.check(undefined, 'app', { kind: 'tool', name: 'b' }).allow).toBe(true)
  })
})
