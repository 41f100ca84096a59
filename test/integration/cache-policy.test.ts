import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { RawResponse } from '../helpers/clients.js'
import { startSdkServer } from '../helpers/sdk-servers.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'
import { cacheGateway, post } from '../helpers/cache.js'
import { closing } from '../helpers/lifecycle.js'

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const PUBLIC_60S = { ttlMs: 60_000, cacheScope: 'public' } as const

function policyDir(rules: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-cache-policy-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), rules)
  return dir
}

function listed(res: RawResponse): { names: string[]; scope: unknown } {
  const result = res.response().result as { tools: { name: string }[]; cacheScope: unknown }
  return { names: result.tools.map((t) => t.name), scope: result.cacheScope }
}

describe('edge cache with policies: hits are filtered per caller', () => {
  it('filters a cached list with an org-wide rule and keeps it public', async () => {
    const backend = await closing(startSdkServer({ cacheHints: { 'tools/list': PUBLIC_60S } }))
    const dir = policyDir(
      'rules:\n  - name: reads\n    servers: [app]\n    allow: { tools: ["get_*"] }\n',
    )
    const gw = await cacheGateway(backend.url, {}, { policies: '.' }, { dir })
    await expect
      .poll(() => gw.cache?.invalidator.isConnected('app') === true, {
        message: 'the listen stream',
      })
      .toBe(true)
    const miss = listed(await post(gw.app, '1'))
    const hit = listed(await post(gw.app, '2'))
    expect(miss).toEqual({ names: ['get_forecast', 'get_alerts'], scope: 'public' })
    expect(hit).toEqual(miss)
    expect(backend.calls('tools/list')).toHaveLength(1)
  })

  it('never shows one org the list another org fetched; claim-based views are private (A-94)', async () => {
    const backend = await closing(startSdkServer({ cacheHints: { 'tools/list': PUBLIC_60S } }))
    const dir = policyDir(
      [
        'rules:',
        '  - name: org-b',
        '    when: { claims: { org: b } }',
        '    servers: [app]',
        '    allow: { tools: ["get_*", "slow_*"] }',
        '  - name: org-a',
        '    when: { claims: { org: a } }',
        '    servers: [app]',
        '    allow: { tools: [get_forecast] }',
        '',
      ].join('\n'),
    )
    const key = await generateTestKey('RS256')
    const jwks = await closing(startJwks([key]))
    const gw = await cacheGateway(
      backend.url,
      {},
      { policies: '.', auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } } },
      { dir },
    )
    await expect
      .poll(() => gw.cache?.invalidator.isConnected('app') === true, {
        message: 'the listen stream',
      })
      .toBe(true)
    const bearer = async (org: string) => ({
      authorization: `Bearer ${await mintToken(claimsFor(ISS, `${PUBLIC}/mcp/app`, { sub: `u-${org}`, org }), { key })}`,
    })
    const orgB = await bearer('b')
    const orgA = await bearer('a')
    const b = listed(await post(gw.app, '1', 'tools/list', {}, orgB))
    const a = listed(await post(gw.app, '2', 'tools/list', {}, orgA))
    const bAgain = listed(await post(gw.app, '3', 'tools/list', {}, orgB))
    expect(b).toEqual({ names: ['get_forecast', 'get_alerts', 'slow_forecast'], scope: 'private' })
    expect(a).toEqual({ names: ['get_forecast'], scope: 'private' })
    expect(bAgain).toEqual(b)
    expect(backend.calls('tools/list')).toHaveLength(1)
  })
})
