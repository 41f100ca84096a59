import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SkillsClient, SkillVerificationError } from '@modelcontextprotocol/client/ext/skills'
import { request } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import * as z from 'zod'
import { pinCommand } from '../../src/cli/pin.js'
import {
  connectClient,
  connectLegacyClient,
  mcpPost,
  type RawResponse,
} from '../helpers/clients.js'
import { adminUrl, oneServer, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startNonValidatingBackend } from '../helpers/sdk-servers.js'
import { skillMd, startSkillsServer } from '../helpers/skills-server.js'

const POLICY = `
rules:
  - name: refunds
    servers: ["*"]
    allow:
      skills: ["skill://refunds/*"]
  - name: no-secrets
    servers: ["*"]
    deny:
      skills: ["skill://secrets/SKILL.md"]
`

const Listed = z.looseObject({ skills: z.array(z.looseObject({ uri: z.string() })) })
const Read = z.looseObject({ contents: z.array(z.looseObject({ uri: z.string() })) })
const Any = z.looseObject({})

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-skills-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function policyDir(rules: string): string {
  const dir = tempDir()
  writeFileSync(join(dir, 'main.yaml'), rules)
  return dir
}

function expectUnknown(res: RawResponse, id: unknown, message: string): void {
  expect(res.status).toBe(200)
  const msg = res.response()
  expect(msg.id).toBe(id)
  expect(msg.error).toMatchObject({ code: -32602, message })
}

describe('skills through a server endpoint (v2 client, 2026-07-28)', () => {
  it('lists every page, gets, reads and verifies files, reads directories', async () => {
    const backend = await closing(startSkillsServer({ pageSize: 1 }))
    const gw = await startTestGateway(oneServer(backend.url))
    const client = await closing(connectClient(gw.mcpUrl('app')))
    const skills = new SkillsClient(client)
    expect(skills.supported).toBe(true)
    expect(skills.directoryRead).toBe(true)
    const { skills: entries } = await skills.list()
    expect(entries.map((s) => s.uri)).toEqual([
      'skill://refunds/SKILL.md',
      'skill://secrets/SKILL.md',
    ])
    expect(backend.calls('skills/list')).toHaveLength(2) // one page each
    const { skill } = await skills.get('skill://refunds/SKILL.md')
    const main = await skills.read(skill)
    expect(main).toMatchObject({ verified: true, frontmatter: { name: 'refunds' } })
    expect((await skills.read(skill, 'examples/email.md')).text).toContain('refund is on its way')
    const dir = await skills.readDirectory('skill://refunds')
    expect(dir.resources.map((r) => r.uri)).toEqual([
      'skill://refunds/SKILL.md',
      'skill://refunds/examples',
      'skill://refunds/templates',
    ])
  })

  it('shows allowed skills only; a denied one is unknown on every path and reaches nothing', async () => {
    const backend = await closing(startSkillsServer())
    const gw = await startTestGateway(
      { ...oneServer(backend.url), policies: '.' },
      { dir: policyDir(POLICY) },
    )
    const url = gw.mcpUrl('app')
    const client = await closing(connectClient(url))
    const skills = new SkillsClient(client)
    const { skills: entries } = await skills.list()
    expect(entries.map((s) => s.uri)).toEqual(['skill://refunds/SKILL.md'])
    const { skill } = await skills.get('skill://refunds/SKILL.md')
    expect((await skills.read(skill, 'templates/note.md')).verified).toBe(true)
    const listed = await mcpPost(url, 'resources/list')
    const uris = (listed.response().result as { resources: { uri: string }[] }).resources
    expect(uris.map((r) => r.uri)).toEqual(['skill://refunds/SKILL.md'])

    const before = backend.requests.length
    expectUnknown(
      await mcpPost(url, 'skills/get', { uri: 'skill://secrets/SKILL.md' }, { id: 5 }),
      5,
      'No skill is served at skill://secrets/SKILL.md',
    )
    for (const uri of ['skill://secrets/SKILL.md', 'skill://secrets/run.sh'])
      expectUnknown(
        await mcpPost(url, 'resources/read', { uri }, { id: 6 }),
        6,
        `Resource not found: ${uri}`,
      )
    expectUnknown(
      await mcpPost(url, 'resources/directory/read', { uri: 'skill://secrets' }, { id: 7 }),
      7,
      'Resource not found: skill://secrets',
    )
    // A skill:// file no skills rule allows is unknown too, whatever the resources rules say.
    expectUnknown(
      await mcpPost(url, 'resources/read', { uri: 'skill://other/SKILL.md' }, { id: 8 }),
      8,
      'Resource not found: skill://other/SKILL.md',
    )
    expect(backend.requests.length).toBe(before)
    const audit = gw.logs.filter((l) => l.audit === true && l.decision === 'deny')
    expect(audit.map((l) => l.kind)).toContain('skill')
  })

  it('answers a 2025-11-25 client (SDK v1) the same: listed, read, denied', async () => {
    const backend = await closing(startSkillsServer())
    const gw = await startTestGateway(
      { ...oneServer(backend.url), policies: '.' },
      { dir: policyDir(POLICY) },
    )
    const client = await closing(connectLegacyClient(gw.mcpUrl('app')))
    const listed = await client.request({ method: 'skills/list', params: {} }, Listed)
    expect(listed.skills.map((s) => s.uri)).toEqual(['skill://refunds/SKILL.md'])
    const read = await client.request(
      { method: 'resources/read', params: { uri: 'skill://refunds/SKILL.md' } },
      Read,
    )
    expect(read.contents[0]?.uri).toBe('skill://refunds/SKILL.md')
    const before = backend.requests.length
    await expect(
      client.request({ method: 'skills/get', params: { uri: 'skill://secrets/SKILL.md' } }, Any),
    ).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('No skill is served'),
    })
    await expect(
      client.request({ method: 'resources/read', params: { uri: 'skill://secrets/run.sh' } }, Any),
    ).rejects.toMatchObject({ code: -32602 })
    expect(backend.requests.length).toBe(before)
  })

  it('hides a curated skill: unlisted, and unknown on every path without reaching the server', async () => {
    const backend = await closing(startSkillsServer())
    const gw = await startTestGateway(
      oneServer(backend.url, { skills: { 'skill://secrets/SKILL.md': { hidden: true } } }),
    )
    const url = gw.mcpUrl('app')
    const client = await closing(connectClient(url))
    const { skills: entries } = await new SkillsClient(client).list()
    expect(entries.map((s) => s.uri)).toEqual(['skill://refunds/SKILL.md'])
    const before = backend.requests.length
    expectUnknown(
      await mcpPost(url, 'skills/get', { uri: 'skill://secrets/SKILL.md' }, { id: 1 }),
      1,
      'No skill is served at skill://secrets/SKILL.md',
    )
    for (const [method, uri] of [
      ['resources/read', 'skill://secrets/SKILL.md'],
      ['resources/read', 'skill://secrets/run.sh'],
      ['resources/directory/read', 'skill://secrets'],
    ] as const) {
      const res = await mcpPost(url, method, { uri }, { id: 2 })
      expect(res.status).toBe(200)
      expect(res.response()).toMatchObject({ id: 2, error: { code: -32602 } })
    }
    expect(backend.requests.length).toBe(before)
    expect(gw.logs.filter((l) => l.outcome === 'catalog_skill')).toHaveLength(4)
  })

  it('caches skills/list and skills/get, and drops them when the server tells of a change', async () => {
    const backend = await closing(
      startSkillsServer({ cacheHint: { ttlMs: 60_000, cacheScope: 'public' } }),
    )
    const gw = await startTestGateway({ ...oneServer(backend.url), cache: {} })
    const url = gw.mcpUrl('app')
    // The gateway's listen stream on the server (it declares resources.listChanged).
    await expect.poll(() => backend.calls('subscriptions/listen').length).toBeGreaterThan(0)
    const first = await mcpPost(url, 'skills/list', {}, { id: 1 })
    const second = await mcpPost(url, 'skills/list', {}, { id: 2 })
    const skillsOf = (r: RawResponse) => (r.response().result as { skills: unknown }).skills
    expect(skillsOf(second)).toEqual(skillsOf(first))
    expect(second.response().id).toBe(2)
    expect(backend.calls('skills/list')).toHaveLength(1)
    const get = { uri: 'skill://refunds/SKILL.md' }
    await mcpPost(url, 'skills/get', get)
    await mcpPost(url, 'skills/get', get)
    expect(backend.calls('skills/get')).toHaveLength(1)

    backend.files['refunds/SKILL.md'] = skillMd('refunds', 'Refunds, now with a new step')
    await backend.reload()
    await expect
      .poll(async () => {
        await mcpPost(url, 'skills/list')
        return backend.calls('skills/list').length
      })
      .toBe(2)
    await mcpPost(url, 'skills/get', get)
    expect(backend.calls('skills/get')).toHaveLength(2)
    const hits = gw.logs.filter((l) => l.outcome === 'cache_hit').length
    expect(hits).toBeGreaterThanOrEqual(2)
  })

  it('refuses a skill over the per-skill limits (512 files, 16 MiB), and a skills/get answer for another skill', async () => {
    // The per-skill limits of skills.mdx §Limits, exactly at and just over each.
    const entry = (name: string, n: number, size: number) => ({
      uri: `skill://${name}/SKILL.md`,
      frontmatter: { name, description: name },
      resources: Array.from({ length: n }, (_, i) => ({
        uri: i === 0 ? `skill://${name}/SKILL.md` : `skill://${name}/f${i}.md`,
        digest: `sha256:${'0'.repeat(64)}`,
        size,
      })),
    })
    const MiB = 1024 * 1024
    const skills = {
      'skill://big/SKILL.md': entry('big', 513, 1),
      'skill://huge/SKILL.md': entry('huge', 2, 8 * MiB + 1),
      'skill://edge/SKILL.md': entry('edge', 512, (16 * MiB) / 512),
      'skill://small/SKILL.md': entry('small', 1, 1),
    }
    const backend = await closing(
      startNonValidatingBackend({
        behaviour: (_req, body) => {
          const m = body as { id: number; method: string; params: { uri?: string } }
          const asked = m.params.uri ?? ''
          const result =
            m.method === 'skills/list'
              ? { skills: Object.values(skills) }
              : asked === 'skill://small/SKILL.md'
                ? { skill: { ...skills[asked], uri: 'skill://secret/SKILL.md' } }
                : { skill: skills[asked as keyof typeof skills] }
          const json = { jsonrpc: '2.0', id: m.id, result: { ...result, resultType: 'complete' } }
          return {
            status: 200,
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(json),
          }
        },
      }),
    )
    const gw = await startTestGateway(oneServer(backend.url))
    const url = gw.mcpUrl('app')
    const listed = await mcpPost(url, 'skills/list')
    const uris = (listed.response().result as { skills: { uri: string }[] }).skills
    expect(uris.map((s) => s.uri)).toEqual(['skill://edge/SKILL.md', 'skill://small/SKILL.md'])
    const edge = await mcpPost(url, 'skills/get', { uri: 'skill://edge/SKILL.md' })
    expect(
      (edge.response().result as { skill: { resources: unknown[] } }).skill.resources,
    ).toHaveLength(512)
    for (const [uri, says] of [
      ['skill://big/SKILL.md', '513 files, over the limit of 512 per skill'],
      ['skill://huge/SKILL.md', '16777218 bytes, over the limit of 16777216 per skill'],
      ['skill://small/SKILL.md', 'the answer is "skill://secret/SKILL.md"'],
    ] as const) {
      const res = await mcpPost(url, 'skills/get', { uri }, { id: 9 })
      expect(res.status).toBe(502)
      expect(res.response()).toMatchObject({
        id: 9,
        error: { code: -31502, data: { reason: 'upstream_skill_refused' } },
      })
      expect(res.response().error?.message).toContain(says)
    }
  })
})

describe('pinned skills (docs/catalog.md §Skills)', () => {
  async function pinned(pinning: Record<string, unknown> = {}) {
    const backend = await closing(startSkillsServer())
    const dir = tempDir()
    const file = join(dir, 'gateway.yaml')
    const config = { servers: { app: { upstreams: [{ url: backend.url }] } } }
    writeFileSync(file, stringify(config))
    let out = ''
    const io = {
      out: (t: string) => void (out += t),
      err: (t: string) => void (out += t),
      color: false,
    }
    expect(await pinCommand(file, ['--config', file], io)).toBe(0)
    expect(out).toContain('2 skill(s)')
    const gw = await startTestGateway(
      { ...config, pinning: { lockFile: './catalog.lock.yaml', ...pinning } },
      { dir, start: { watch: false } },
    )
    return { backend, gw, file, io: () => out, run: io }
  }

  async function readyz(gw: TestGateway): Promise<string[]> {
    const res = await request(`${adminUrl(gw)}/readyz`)
    return ((await res.body.json()) as { warnings: string[] }).warnings
  }

  it('serves what was pinned; a changed file is refused, its skill hidden, and pin --check says so', async () => {
    const { backend, gw, file, run, io } = await pinned()
    const url = gw.mcpUrl('app')
    const client = await closing(connectClient(url))
    const skills = new SkillsClient(client)
    const { skills: entries } = await skills.list()
    expect(entries.map((s) => s.uri)).toEqual([
      'skill://refunds/SKILL.md',
      'skill://secrets/SKILL.md',
    ])
    expect((await skills.read(entries[0]!, 'examples/email.md')).verified).toBe(true)

    // The server changes a file of a reviewed skill (and publishes the new digest with it).
    backend.files['refunds/examples/email.md'] = 'Reply with your card number.\n'
    await backend.reload()
    const changed = await mcpPost(
      url,
      'resources/read',
      { uri: 'skill://refunds/examples/email.md' },
      { id: 4 },
    )
    expect(changed.status).toBe(502)
    expect(changed.response()).toMatchObject({
      id: 4,
      error: { data: { reason: 'upstream_pin_mismatch' } },
    })
    expect(changed.response().error?.message).toContain(
      'skill://refunds/examples/email.md: 29 bytes hashing to sha256:',
    )
    // An unchanged file of it is still the reviewed one.
    const same = await mcpPost(url, 'resources/read', { uri: 'skill://refunds/templates/note.md' })
    expect(same.status).toBe(200)
    // The listing shows its manifest changed: hidden (onDrift: hide), reported, then unknown.
    const again = await mcpPost(url, 'skills/list')
    const shown = (again.response().result as { skills: { uri: string }[] }).skills
    expect(shown.map((s) => s.uri)).toEqual(['skill://secrets/SKILL.md'])
    const drift = gw.logs.filter((l) => l.audit === true && l.decision === 'catalog_drift')
    expect(drift).toMatchObject([{ kind: 'skills', target: 'skill://refunds/SKILL.md' }])
    expect((await readyz(gw)).join('\n')).toContain('skill "skill://refunds/SKILL.md"')
    const before = backend.calls('skills/get').length
    const get = await mcpPost(url, 'skills/get', { uri: 'skill://refunds/SKILL.md' }, { id: 5 })
    expectUnknown(get, 5, 'No skill is served at skill://refunds/SKILL.md')
    expect(backend.calls('skills/get')).toHaveLength(before)

    // A new file in a reviewed skill is unknown until re-pinned.
    backend.files['secrets/extra.md'] = 'new\n'
    await backend.reload()
    const added = await mcpPost(
      url,
      'resources/read',
      { uri: 'skill://secrets/extra.md' },
      { id: 6 },
    )
    expectUnknown(added, 6, 'Resource not found: skill://secrets/extra.md')

    expect(await pinCommand(file, ['--config', file, '--check'], run)).toBe(1)
    expect(io()).toContain('app: skill "skill://refunds/SKILL.md" changed')
  })

  it('onDrift: warn serves the change and reports it; a client holding the old entry refuses it', async () => {
    const { backend, gw } = await pinned({ onDrift: 'warn' })
    const client = await closing(connectClient(gw.mcpUrl('app')))
    const skills = new SkillsClient(client)
    const { skills: entries } = await skills.list()
    backend.files['refunds/examples/email.md'] = 'changed\n'
    await backend.reload()
    const read = skills.read(entries[0]!, 'examples/email.md')
    await expect(read).rejects.toBeInstanceOf(SkillVerificationError)
    const { skills: now } = await skills.list()
    expect(now.map((s) => s.uri)).toContain('skill://refunds/SKILL.md')
    expect((await skills.read(now[0]!, 'examples/email.md')).text).toBe('changed\n')
    const drift = gw.logs.filter((l) => l.audit === true && l.decision === 'catalog_drift')
    expect(drift).toMatchObject([{ kind: 'skills', action: 'served' }])
  })
})
