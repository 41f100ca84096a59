import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { describe, expect, it, onTestFinished } from 'vitest'
import { loadConfigFile } from '../../src/runtime/load.js'
import { watchConfig, type ConfigWatcher } from '../../src/runtime/watch.js'
import type { PolicySet } from '../../src/policy/policy.js'
import { startGateway, type RunningGateway } from '../../src/server.js'
import { connectClient, mcpBody, mcpHeaders, rawPost, rawRequest } from '../helpers/clients.js'
import {
  startNonValidatingBackend,
  startSdkServer,
  type TestServer,
} from '../helpers/sdk-servers.js'

/** Hot reload (docs/policy.md §Hot reload): policy and config edits apply within 2 s; broken ones are refused. */

const allowing = (...tools: string[]) =>
  `rules:\n  - name: allowed\n    servers: ["*"]\n    allow: { tools: [${tools.map((t) => JSON.stringify(t)).join(', ')}] }\n`

const configFor = (backend: string, extra = '') =>
  `listen: { host: 127.0.0.1, port: 0 }\nadmin: { host: 127.0.0.1, port: 0 }\npolicies: ./policies\n${extra}servers:\n  app:\n    upstreams: [{ url: "${backend}" }]\n`

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

async function backend(): Promise<TestServer> {
  const b = await startNonValidatingBackend()
  onTestFinished(() => b.close())
  return b
}

/**
 * /readyz (admin listener): a rejected reload is a warning; the gateway stays ready on its last
 * good config.
 */
async function readyz(gw: RunningGateway): Promise<{ status: number; problems: string[] }> {
  const res = await rawRequest('GET', `http://127.0.0.1:${gw.adminPort}/readyz`)
  expect(res.status).toBe(200)
  return { status: res.status, problems: (res.json() as { warnings: string[] }).warnings }
}

describe('hot reload', () => {
  it('applies a policy edit within 2 seconds, without a restart', async () => {
    const { gw, write } = await start(await backend(), allowing('search'))
    expect(await attempt(gw, 'echo')).toBe('denied')
    write('policies/main.yaml', allowing('search', 'echo'))
    await expect.poll(() => attempt(gw, 'echo'), { timeout: 2000 }).toBe('allowed')
    write(
      'policies/new.yaml',
      'rules: [{ name: no-echo, servers: ["*"], deny: { tools: [echo] } }]\n',
    )
    await expect.poll(() => attempt(gw, 'echo'), { timeout: 2000 }).toBe('denied')
  })

  it('keeps the previous policy on a broken edit, shows it on /readyz, and recovers on a fix', async () => {
    const { gw, write, logs } = await start(await backend(), allowing('search', 'echo'))
    expect(await readyz(gw)).toEqual({ status: 200, problems: [] })
    write(
      'policies/main.yaml',
      'rules:\n  - name: oops\n    servers: ["*"]\n    alow: { tools: ["*"] }\n',
    )
    await expect.poll(async () => (await readyz(gw)).problems.length, { timeout: 2000 }).toBe(1)
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
    await expect.poll(async () => (await readyz(gw)).problems.length, { timeout: 2000 }).toBe(0)
    expect(await attempt(gw, 'echo')).toBe('denied')
  })

  it('reloads the config file too, and an invalid config keeps the running one', async () => {
    const b = await backend()
    const { gw, write } = await start(b, allowing('search'))
    expect(await attempt(gw, 'delete_repo')).toBe('denied')
    write('gateway.yaml', configFor(b.url, 'policyMode: dry-run\n'))
    await expect.poll(() => attempt(gw, 'delete_repo'), { timeout: 2000 }).toBe('allowed')
    write('gateway.yaml', configFor(b.url, 'policyMode: maybe\n'))
    await expect.poll(async () => (await readyz(gw)).problems.length, { timeout: 2000 }).toBe(1)
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
    await expect.poll(() => attempt(gw, 'whoami'), { timeout: 2000 }).toBe('allowed')
    write('gateway.yaml', configFor(server.url, 'policyMode: dry-run\n'))
    await expect.poll(() => attempt(gw, 'delete_station'), { timeout: 2000 }).toBe('allowed')
    server.notify.toolsChanged()
    await expect.poll(() => changes, { timeout: 2000 }).toBe(1)
  })

  it('polls the policy folder and swaps in a changed policy', async () => {
    const { swapped, edit } = watchedPolicyFolder(200)
    edit(allowing('a', 'b'))
    await expect.poll(() => swapped.length, { timeout: 3000 }).toBe(1)
    expect(swapped[0]?.check(undefined, 'app', { kind: 'tool', name: 'b' }).allow).toBe(true)
  })
})

describe('re-reading on demand (SIGHUP)', () => {
  it('check() applies an edit at once, without waiting for the poll', async () => {
    const { swapped, edit, watcher } = watchedPolicyFolder(600_000) // the poll never runs here
    await watcher.check()
    expect(swapped).toHaveLength(0) // nothing changed yet
    edit(allowing('a', 'b'))
    await watcher.check()
    expect(swapped).toHaveLength(1)
    expect(swapped[0]?.check(undefined, 'app', { kind: 'tool', name: 'b' }).allow).toBe(true)
  })
})

/** A watcher on a temp config whose policy folder allows tool `a`; records every policy swap. */
function watchedPolicyFolder(pollMs: number): {
  swapped: (PolicySet | undefined)[]
  edit: (rules: string) => void
  watcher: ConfigWatcher
} {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-watch-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'gateway.yaml'), configFor('http://127.0.0.1:1/mcp'))
  mkdirSync(join(dir, 'policies'))
  const edit = (rules: string): void => writeFileSync(join(dir, 'policies/main.yaml'), rules)
  edit(allowing('a'))
  const swapped: (PolicySet | undefined)[] = []
  const watcher = watchConfig({
    loaded: loadConfigFile(join(dir, 'gateway.yaml')),
    log: pino({ level: 'silent' }),
    applyConfig: () => Promise.reject(new Error('the config did not change')),
    applyPolicy: (p) => void swapped.push(p),
    pollMs,
  })
  if (watcher === undefined) throw new Error('a policy folder is always watched')
  onTestFinished(() => watcher.close())
  return { swapped, edit, watcher }
}
