import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { tokensCommand } from '../../src/cli/tokens.js'
import { startRedis, HAVE_REDIS, IN_CI, MISSING_REDIS } from '../helpers/cache.js'
import { connectClient, mcpPost } from '../helpers/clients.js'
import type { TestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { openConnectLink, userAuthWorld, type UserAuthWorld } from '../helpers/user-auth.js'

if (!HAVE_REDIS && IN_CI) throw new Error(MISSING_REDIS)

/** A v2 client of `gw` as `account`; `connect`: the connect page is walked when asked. */
async function clientOf(w: UserAuthWorld, gw: TestGateway, account: string, prompts: string[]) {
  const client = await closing(
    connectClient(gw.mcpUrl('tracker'), {
      auth: await w.token(account, 'tracker', gw),
      capabilities: { elicitation: { url: {} } },
    }),
  )
  client.setRequestHandler('elicitation/create', async (req) => {
    const url = (req.params as { url: string }).url
    prompts.push(url)
    expect((await openConnectLink(url, w.idp, w.as, account)).status).toBe(200)
    return { action: 'accept' }
  })
  return client
}

/** `mcp-edge tokens …` against `yaml`, its output captured. */
async function tokens(yaml: string, ...args: string[]) {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-tokens-'))
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, yaml)
  let out = ''
  let err = ''
  const code = await tokensCommand(file, args, {
    out: (t) => void (out += t),
    err: (t) => void (err += t),
  })
  return { code, out, err }
}

describe.skipIf(!HAVE_REDIS)('userAuth with a shared Redis store', () => {
  it('two gateways see one user’s token; tokens list/revoke; a rotated key reads nothing', async () => {
    const redis = await startRedis()
    let now = Date.now()
    const w = await userAuthWorld({ redis: redis.url, now: () => now })
    const prompts: string[] = []
    const one = await clientOf(w, w.gw, 'alice', prompts)
    expect(textOf(await one.callTool({ name: 'whoami', arguments: {} }))).toBe('user:alice')
    expect(prompts).toHaveLength(1)

    // Another replica: the same store, no second prompt.
    const gw2 = await w.another({ redis: redis.url, now: () => now })
    const two = await clientOf(w, gw2, 'alice', prompts)
    expect(textOf(await two.callTool({ name: 'whoami', arguments: {} }))).toBe('user:alice')
    expect(prompts).toHaveLength(1)

    // Encrypted at rest: no value in Redis holds a token, nor names the user.
    const keys = await redis.client.keys('mcp-edge:ut1:*')
    const values = await Promise.all(keys.map((k) => redis.client.get(k)))
    const stored = [...keys, ...values].join('\n')
    expect(w.as.issued.length).toBeGreaterThan(0)
    for (const secret of w.as.issued) expect(stored).not.toContain(secret)
    expect(stored).not.toContain('alice')

    const listed = await tokens(w.configText(), 'list', '--json')
    expect(listed.code).toBe(0)
    expect(JSON.parse(listed.out)).toEqual([
      expect.objectContaining({
        server: 'tracker',
        sub: 'alice',
        iss: w.idp.issuer,
        readable: true,
      }),
    ])
    for (const secret of w.as.issued) expect(listed.out + listed.err).not.toContain(secret)

    // A gateway whose key was rotated: the record does not open; it asks again, never crashes.
    const rotated = randomBytes(32).toString('base64')
    const gw3 = await w.another({ redis: redis.url, key: rotated, now: () => now })
    const res = await mcpPost(
      gw3.mcpUrl('tracker'),
      'tools/call',
      {
        name: 'whoami',
        arguments: {},
        _meta: { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } },
      },
      { auth: await w.token('alice', 'tracker', gw3), id: 3 },
    )
    expect(res.status).toBe(200)
    expect((res.response().result as { resultType: string }).resultType).toBe('input_required')
    const unreadable = await tokens(w.configText({ key: rotated }), 'list', '--json')
    expect(JSON.parse(unreadable.out)).toEqual([{ server: 'tracker', readable: false }])

    // Revoked from the command line: at the AS (RFC 7009) and in the store; both replicas ask
    // again once their copy (5 s) is old.
    const revoked = await tokens(w.configText(), 'revoke', '--subject', 'alice')
    expect(revoked).toMatchObject({ code: 0, out: 'revoked 1 connection\n' })
    expect(w.as.requests.filter((r) => r.startsWith('POST /token/revocation'))).toHaveLength(2)
    expect(revoked.err).toContain('"action":"revoke"')
    for (const secret of w.as.issued) expect(revoked.err).not.toContain(secret)
    now += 6_000
    expect(textOf(await one.callTool({ name: 'whoami', arguments: {} }))).toBe('user:alice')
    expect(prompts).toHaveLength(2)
  })

  it('with the in-memory store, tokens says where the tokens live', async () => {
    const w = await userAuthWorld()
    const listed = await tokens(w.configText(), 'list')
    expect(listed.code).toBe(1)
    expect(listed.err).toContain('memory of the running gateway')
  })
})
