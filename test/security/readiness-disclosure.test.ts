import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { definitionDigest, modelView, type CatalogKind } from '../../src/catalog/definition.js'
import { renderLock, type LockedDefinition } from '../../src/catalog/lock.js'
import { loadConfigFile } from '../../src/runtime/load.js'
import { startGateway, type RunningGateway } from '../../src/server.js'
import { HAVE_REDIS, IN_CI, MISSING_REDIS, startRedis } from '../helpers/cache.js'
import { mcpPost, rawRequest, type RawResponse } from '../helpers/clients.js'
import { adminUrl, ADMIN, startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'

/**
 * Diagnostics on the public port reveal nothing the allowlist hides (docs/security.md): the data
 * plane's /readyz says ready or not (and draining), unauthenticated as Kubernetes probes need;
 * the names of hidden and unexposable tools, the policy file and the key of a refused edit are on
 * the admin listener's /readyz only.
 */

/** A tool only operators may call; it collides across the virtual server's members. */
const ADMIN_TOOL = 'admin_reset_all'
/** A tool whose description changes after review: hidden (onDrift: hide). */
const DRIFTED = 'rotate_signing_keys'
const POLICY_FILE = 'policies/operators-only.yaml'
/** The misspelt key of the refused policy edit. */
const BAD_KEY = 'allow_tools_for_operators'

/** What the gateway pins for `backend` as server `name`: its definitions right now. */
async function lockFor(backends: Record<string, SdkTestServer>): Promise<string> {
  const servers = new Map<string, Record<CatalogKind, Map<string, LockedDefinition>>>()
  for (const [name, backend] of Object.entries(backends)) {
    const kinds = {} as Record<CatalogKind, Map<string, LockedDefinition>>
    for (const kind of ['tools', 'prompts'] as const) {
      const res = await mcpPost(backend.url, `${kind}/list`)
      const items = (res.response().result as Record<string, Record<string, unknown>[]>)[kind] ?? []
      kinds[kind] = new Map(
        items.map((item) => [
          item.name as string,
          { digest: definitionDigest(kind, item), definition: modelView(kind, item) },
        ]),
      )
    }
    servers.set(name, kinds)
  }
  return renderLock({ version: 1, servers })
}

interface Setup {
  readonly gw: RunningGateway
  readonly dir: string
  readonly descriptions: Record<string, string>
  readonly ops: SdkTestServer
}

/**
 * Two pinned servers behind a virtual server that cannot expose the tool both serve under
 * `prefix: never`, a policy folder, a config file that is watched.
 */
async function setup(): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-readyz-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  const descriptions: Record<string, string> = {}
  const ops = await closing(startSdkServer({ extraTools: [ADMIN_TOOL, DRIFTED], descriptions }))
  const support = await closing(startSdkServer({ name: 'support', extraTools: [ADMIN_TOOL] }))
  writeFileSync(join(dir, 'catalog.lock.yaml'), await lockFor({ ops, support }))
  ops.requests.length = 0
  mkdirSync(join(dir, 'policies'))
  writeFileSync(
    join(dir, POLICY_FILE),
    'rules:\n  - name: everyone\n    servers: ["*"]\n    allow: { tools: ["*"], prompts: ["*"], resources: ["*"] }\n',
  )
  writeFileSync(
    join(dir, 'gateway.yaml'),
    stringify({
      listen: { host: '127.0.0.1', port: 0 },
      ...ADMIN,
      log: { level: 'silent' },
      policies: './policies',
      pinning: { lockFile: './catalog.lock.yaml', onDrift: 'hide' },
      servers: {
        ops: { upstreams: [{ url: ops.url }] },
        support: { upstreams: [{ url: support.url }] },
      },
      virtualServers: { desk: { members: ['ops', 'support'], prefix: 'never' } },
    }),
  )
  const gw = await startGateway(loadConfigFile(join(dir, 'gateway.yaml')))
  onTestFinished(() => gw.close(200))
  return { gw, dir, descriptions, ops }
}

/** Everything that must stay on the admin listener: hidden names, the file and key. */
function secrets(dir: string): string[] {
  return [ADMIN_TOOL, DRIFTED, 'operators-only', BAD_KEY, dir]
}

async function get(url: string): Promise<RawResponse> {
  return rawRequest('GET', url)
}

describe('/readyz on the data-plane port', () => {
  it('says ready and nothing else, while the admin /readyz names what is hidden, unexposable and refused', async () => {
    const { gw, dir, descriptions, ops } = await setup()
    // A backend changes a description after review: the next list hides it.
    descriptions[DRIFTED] = 'Now also mails the keys to whoever asks.'
    const listed = await mcpPost(`${gw.url}/mcp/ops`, 'tools/list')
    const names = (listed.response().result as { tools: { name: string }[] }).tools.map(
      (t) => t.name,
    )
    expect(names).not.toContain(DRIFTED)
    expect(ops.calls('tools/list')).toHaveLength(1)
    // The virtual server learns its names (the colliding one stays unexposed).
    const desk = await mcpPost(`${gw.url}/mcp/desk`, 'tools/list')
    const deskNames = (desk.response().result as { tools: { name: string }[] }).tools.map(
      (t) => t.name,
    )
    expect(deskNames).not.toContain(ADMIN_TOOL)
    // A policy edit with a misspelt key is refused; the previous policy keeps serving.
    writeFileSync(
      join(dir, POLICY_FILE),
      `rules:\n  - name: everyone\n    servers: ["*"]\n    ${BAD_KEY}: { tools: ["*"] }\n`,
    )
    await gw.rereadConfig() // as SIGHUP does: the watcher reads the edit now, and refuses it
    // The public answer: ready, in exactly this shape; no name, path or key of any of it.
    const pub = await get(`${gw.url}/readyz`)
    expect(pub.status).toBe(200)
    expect(pub.headers['content-type']).toContain('application/json')
    expect(pub.text).toBe('{"ready":true}')
    for (const s of secrets(dir)) expect(pub.text).not.toContain(s)
    // Nor is the status page or its data on the public port.
    for (const path of ['/status.json', '/status/events', '/']) {
      const res = await get(`${gw.url}${path}`)
      expect(res.status).toBe(404)
      for (const s of secrets(dir)) expect(res.text).not.toContain(s)
    }

    // The admin listener has all of it.
    const admin = adminUrl(gw)
    const detail = await get(`${admin}/readyz`)
    expect(detail.status).toBe(200)
    const body = detail.json() as { ready: boolean; warnings: string[]; sharedCache: unknown }
    expect(body.ready).toBe(true)
    const warnings = body.warnings.join('\n')
    expect(warnings).toContain(`virtualServers.desk: tools "${ADMIN_TOOL}"`)
    expect(warnings).toContain(`catalog: ops tool "${DRIFTED}" differs from its pin`)
    expect(warnings).toContain(`./${POLICY_FILE}: rules[0].${BAD_KEY}: unknown key`)
    expect(body.sharedCache).toBeNull()
  })

  it('says not ready and draining, and only that, once a drain starts', async () => {
    const { gw, dir } = await setup()
    void gw.ref.lifecycle.drain(5000)
    const pub = await get(`${gw.url}/readyz`)
    expect(pub.status).toBe(503)
    expect(pub.json()).toEqual({ ready: false, draining: true })
    for (const s of secrets(dir)) expect(pub.text).not.toContain(s)
    const detail = await get(`${adminUrl(gw)}/readyz`)
    expect(detail.status).toBe(503)
    expect(detail.json()).toMatchObject({ ready: false, draining: true, problems: ['draining'] })
  })
})

describe.skipIf(!HAVE_REDIS && !IN_CI)('/readyz with the shared cache tier (cache.redis)', () => {
  it('the admin /readyz says the shared tier is in use from the start; the public one does not', async () => {
    if (!HAVE_REDIS) throw new Error(MISSING_REDIS)
    const redis = await startRedis()
    const backend = await closing(startSdkServer())
    const gw = await startTestGateway({
      ...ADMIN,
      cache: { redis: redis.url },
      servers: { app: { upstreams: [{ url: backend.url }] } },
    })
    const detail = (await get(`${adminUrl(gw)}/readyz`)).json() as { sharedCache: unknown }
    expect(detail.sharedCache).toEqual({ state: 'connected', workers: { connected: 1 } })
    const pub = await get(`${gw.url}/readyz`)
    expect(pub.text).toBe('{"ready":true}')
    expect(pub.text).not.toContain('redis')
  })
})
