import { spawn } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { describe, expect, it, onTestFinished } from 'vitest'
import { ANY_PORTS, startDemoServers } from '../../deploy/demo/servers.js'
import { loadConfigFile } from '../../src/runtime/load.js'
import { startGateway } from '../../src/server.js'
import { closing } from '../helpers/lifecycle.js'

/**
 * README "Things to try", run as written: the demo of `npm start` (its config, policies and lock,
 * copied to a folder of its own) on free ports, and each step's shell block run by bash from that
 * folder. The blocks are read from the README, so a step that stops working fails here. What is
 * changed on the way: the demo's fixed ports become this run's, `npx mcp-edge` the source entry
 * (no build needed), and the replica's 20 s stop an 8 s one: longer than the step's `sleep 3` plus
 * a loaded machine's delays, so /readyz is read while the replica is still away.
 */

const root = fileURLToPath(new URL('../../', import.meta.url))
/** tsx's loader by its path: the steps run in another folder, where `tsx` does not resolve. */
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href

/** The shell blocks of README "Things to try": the helpers, then each step by its heading. */
function thingsToTry(): { readonly helpers: string; readonly steps: Map<string, string> } {
  const readme = readFileSync(join(root, 'README.md'), 'utf8')
  const start = readme.indexOf('### Things to try')
  const section = readme.slice(start, readme.indexOf('\n### ', start + 1))
  const blocks = (text: string): string[] =>
    [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] as string)
  const [intro, ...rest] = section.split('\n#### ')
  const steps = new Map<string, string>()
  for (const part of rest) steps.set(part.slice(0, part.indexOf('\n')), blocks(part).join('\n'))
  return { helpers: blocks(intro ?? '')[0] ?? '', steps }
}

/** Runs `script` with bash in `cwd` (asynchronously: the demo answers from this process). */
function bash(script: string, cwd: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')))
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, out })
    })
  })
}

describe('README "Things to try"', () => {
  it(
    'each step does what the README says, against the demo of npm start',
    { timeout: 180_000 },
    async () => {
      const demo = await closing(startDemoServers(ANY_PORTS))
      const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-demo-'))
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
      mkdirSync(join(dir, 'deploy/demo'), { recursive: true })
      mkdirSync(join(dir, 'policies'))
      copyFileSync(join(root, 'policies/default.yaml'), join(dir, 'policies/default.yaml'))
      copyFileSync(
        join(root, 'deploy/demo/catalog.lock.yaml'),
        join(dir, 'deploy/demo/catalog.lock.yaml'),
      )
      const ports: Record<string, number> = {
        '9101': demo.weather.port,
        '9104': demo.weather2.port,
        '9102': demo.docs.port,
        '9103': demo.ci.port,
      }
      const demoPorts = (text: string): string =>
        text.replace(/127\.0\.0\.1:(910[1-4])/g, (_m, p: string) => `127.0.0.1:${ports[p]}`)
      const config = demoPorts(readFileSync(join(root, 'deploy/gateway.demo.yaml'), 'utf8'))
        .replace('listen: { host: 127.0.0.1, port: 8080 }', 'listen: { host: 127.0.0.1, port: 0 }')
        .replace('admin: { host: 127.0.0.1, port: 9090 }', 'admin: { host: 127.0.0.1, port: 0 }')
        .replace('log: { level: info }', 'log: { level: silent }')
      writeFileSync(join(dir, 'deploy/gateway.demo.yaml'), config)
      const gw = await startGateway(loadConfigFile(join(dir, 'deploy/gateway.demo.yaml')))
      onTestFinished(() => gw.close(200))
      ports['8080'] = gw.port
      ports['9090'] = gw.adminPort ?? 0

      const { helpers, steps } = thingsToTry()
      expect([...steps.keys()]).toEqual([
        'Follow events',
        'Read a skill',
        'Trip a limit',
        'Hide a tool',
        'Watch a drift',
        'Stop a replica',
      ])
      const run = async (step: string): Promise<string> => {
        const script = `${helpers}\n${steps.get(step) ?? ''}`
          .replace(/127\.0\.0\.1:(8080|9090|910[1-4])/g, (_m, p: string) => `127.0.0.1:${ports[p]}`)
          .replaceAll('npx mcp-edge', `node --import ${tsx} ${join(root, 'src/cli.ts')}`)
          .replace('seconds=20', 'seconds=8')
        const r = await bash(script, dir)
        return r.out
      }

      // Follow events: a run's event by poll and on a stream; a denied event type is unknown.
      const events = await run('Follow events')
      expect(events).toContain('run 1 of nightly started')
      expect(events).toMatch(/"events":\[\{"eventId":"evt_[^"]+","name":"ci\.run_finished"/)
      expect(events).toContain('"pipeline":"nightly","run":1,"status":"passed"')
      expect(events).toContain('notifications/events/event')
      expect(events).toContain('"pipeline":"deploy","run":2')
      expect(events).toMatch(/"error":\{"code":-32602,"message":"[^"]*ci\.secret_rotated/)

      // Read a skill: the allowed one listed and read, the denied one unknown.
      const skill = await run('Read a skill')
      expect(skill.split('\n')[0]).toBe('"uri":"skill://release/SKILL.md"')
      expect(skill).not.toContain('"uri":"skill://rotate-secrets/SKILL.md"')
      expect(skill).toContain('"text":"- changelog written\\n- version bumped')
      expect(skill).toMatch(
        /"error":\{"code":-32602,"message":"No skill is served at skill:\/\/rotate-secrets\/SKILL\.md"/,
      )
      // …both pinned by the lock, as the status page's Catalog lists them.
      const status = (await (
        await fetch(`http://127.0.0.1:${ports['9090']}/status.json`)
      ).json()) as { catalog: { server: string; skills: { pinned: string[]; drifted: [] } }[] }
      expect(status.catalog.find((c) => c.server === 'ci')?.skills).toMatchObject({
        pinned: ['skill://release/SKILL.md', 'skill://rotate-secrets/SKILL.md'],
        drifted: [],
      })

      // Trip a limit: ten runs a minute (two made above; one more may have dripped back in since,
      // at one every 6 s), then 429 with its headers.
      const limit = await run('Trip a limit')
      const codes = limit.split('\n')[0]?.trim() ?? ''
      expect(codes).toMatch(/^(200 ){8,9}429( 429)+$/)
      expect(limit).toMatch(/^retry-after: \d+/im)
      expect(limit).toMatch(/^ratelimit-policy: /im)

      // Hide a tool: gone while the policy file is there.
      const hidden = await run('Hide a tool')
      expect(hidden).toContain('"name":"get_forecast"')
      expect(hidden).not.toContain('"name":"get_alerts"')

      // Watch a drift: hidden, and pin --check names it (exit 1 with a diff).
      const drift = await run('Watch a drift')
      expect(drift.split('\n').slice(0, 4)).toEqual([
        'get_forecast drifted',
        '0',
        'skill://release/SKILL.md drifted',
        '0',
      ])
      expect(drift).toContain('weather: tool "get_forecast" changed')
      expect(drift).toContain('ci: skill "skill://release/SKILL.md" changed')
      expect(drift).toContain('get_forecast restored')
      expect(drift).toContain('skill://release/SKILL.md restored')

      // Stop a replica: out of rotation on /readyz, the other replica serves.
      const stop = await run('Stop a replica')
      expect(stop).toContain('stopping for 8 s')
      expect(stop).toMatch(
        /"upstreamsOut":\[\{"server":"weather","upstream":"weather#1","state":"down"/,
      )
      expect(stop.trim().split('\n').at(-1)?.trim()).toBe('200 200 200')
      // …and back in rotation once it answers again.
      await expect
        .poll(
          async () => {
            const r = await fetch(`http://127.0.0.1:${ports['9090']}/readyz`)
            return ((await r.json()) as { upstreamsOut: unknown[] }).upstreamsOut
          },
          { timeout: 15_000, interval: 500 },
        )
        .toEqual([])
    },
  )
})
