import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { loadConfigFile } from '../../src/runtime/load.js'
import { startGateway, type RunningGateway } from '../../src/server.js'
import { mcpBody, mcpHeaders, rawPost } from '../helpers/clients.js'
import { startNonValidatingBackend, type NonValidatingBackend } from '../helpers/sdk-servers.js'

/**
 * A policy edit that changes what a runtime compiles from the policy (runtime/runtime.ts: the
 * limiter of `limits:`, the body reading of servers with conditions) takes effect whole on hot
 * reload (docs/policy.md §Hot reload), not only the rules: a swap of the rules alone would leave
 * the old limiter counting and a new condition reading arguments no strict scan had checked.
 */

const RULES = `rules:
  - name: calls
    servers: ["*"]
    allow: { tools: [lookup] }
`

async function start(): Promise<{
  gw: RunningGateway
  backend: NonValidatingBackend
  edit: (text: string) => void
}> {
  const backend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-reload-shape-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(
    join(dir, 'gateway.yaml'),
    `listen: { host: 127.0.0.1, port: 0 }\npolicies: ./policies\nservers:\n  app:\n    upstreams: [{ url: "${backend.url}" }]\n    trustHeaders: true\n`,
  )
  mkdirSync(join(dir, 'policies'))
  const edit = (text: string): void => writeFileSync(join(dir, 'policies/main.yaml'), text)
  edit(RULES)
  const gw = await startGateway(loadConfigFile(join(dir, 'gateway.yaml')), {
    watch: true,
    logDestination: { write: () => undefined },
  })
  onTestFinished(() => gw.close(200))
  return { gw, backend, edit }
}

async function call(gw: RunningGateway, args: Record<string, unknown> = {}) {
  const res = await rawPost(
    `${gw.url}/mcp/app`,
    mcpBody('tools/call', { name: 'lookup', arguments: args }),
    mcpHeaders('tools/call', 'lookup'),
  )
  return { status: res.status, body: res.json() as { error?: { code: number } } }
}

describe('a policy reload that changes what the runtime compiles', () => {
  it('counts limits added by a policy edit', async () => {
    const { gw, edit } = await start()
    expect((await call(gw)).status).toBe(200)
    expect((await call(gw)).status).toBe(200)
    edit(
      `${RULES}limits:\n  - name: one\n    servers: ["*"]\n    tools: ["*"]\n    key: ip\n    rate: 1/hour\n    burst: 1\n`,
    )
    await gw.rereadConfig()
    expect((await call(gw)).status).toBe(200)
    const second = await call(gw)
    expect(second.status).toBe(429)
    expect(second.body.error?.code).toBe(-31029)
  })

  it('reads the arguments a condition added by a policy edit judges, on a trusting server', async () => {
    const { gw, backend, edit } = await start()
    edit(`${RULES}  - name: small-only
    servers: [app]
    deny: { tools: [lookup] }
    unless: 'args.size < 10.0'
`)
    await gw.rereadConfig()
    const seen = backend.requests.length
    expect((await call(gw, { size: 3 })).body.error).toBeUndefined()
    expect(backend.requests.length).toBe(seen + 1)
    // A case variant of the key the condition reads is refused before any decision: the body was
    // read the way a server with conditions reads it (docs/security.md), not as it was before.
    const variant = await call(gw, { size: 3, Size: 50 })
    expect(variant.status).toBe(400)
    expect(backend.requests.length).toBe(seen + 1)
  })
})
