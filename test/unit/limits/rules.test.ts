import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { ConfigError, loadConfigFile } from '../../../src/runtime/load.js'
import { clientAddress } from '../../../src/limits/client-ip.js'
import { explainCommand } from '../../../src/cli/explain.js'

/** A config file with policies/limits.yaml; returns its path. */
function configWith(policy: string, extra: Record<string, unknown> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-limit-rules-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'policies'))
  writeFileSync(join(dir, 'policies', 'limits.yaml'), policy)
  const file = join(dir, 'gateway.yaml')
  writeFileSync(
    file,
    stringify({
      policies: 'policies',
      servers: { media: { upstreams: [{ url: 'http://127.0.0.1:1/mcp' }] } },
      ...extra,
    }),
  )
  return file
}

function problems(policy: string, extra: Record<string, unknown> = {}): string[] {
  try {
    loadConfigFile(configWith(policy, extra))
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems]
    throw err
  }
  return []
}

const AUTH = {
  auth: {
    publicUrl: 'https://gw.example',
    jwt: { issuer: 'https://idp.example', jwksUrl: 'https://idp.example/jwks' },
  },
}

const limit = (fields: string): string => `
limits:
  - name: l
    servers: [media]
    tools: ["*"]
${fields}`

describe('limits in policy files: config errors', () => {
  it.each([
    [
      'an unknown key',
      limit('    key: none\n    rate: 1/second\n    brust: 3'),
      'limits[0].brust: unknown key',
    ],
    [
      'a bad rate',
      limit('    key: none\n    rate: 10/fortnight'),
      'expected "<N>/second|minute|hour|day"',
    ],
    [
      'a zero rate',
      limit('    key: none\n    rate: 0/second'),
      'expected "<N>/second|minute|hour|day"',
    ],
    [
      'both rate and concurrency',
      limit('    key: none\n    rate: 1/second\n    concurrency: 2'),
      'exactly one of rate or concurrency',
    ],
    [
      'burst without rate',
      limit('    key: none\n    concurrency: 2\n    burst: 3'),
      'burst needs rate',
    ],
    [
      'an unknown key kind',
      limit('    key: cookie:x\n    rate: 1/second'),
      'expected "claim:<name>"',
    ],
    [
      'a claim key without auth',
      limit('    key: claim:sub\n    rate: 1/second'),
      'keying on a claim needs auth',
    ],
    [
      'an unknown server',
      limit('    key: none\n    rate: 1/second').replace('[media]', '[medai]'),
      'no server named "medai"',
    ],
    [
      'a name that is no sf-string',
      limit('    key: none\n    rate: 1/second').replace('name: l', 'name: "a b"'),
      'limit names are',
    ],
    [
      'nothing counted',
      '\nlimits:\n  - name: l\n    servers: [media]\n    key: none\n    rate: 1/second\n',
      'name what the limit counts',
    ],
  ])('%s', (_label, policy, message) => {
    expect(problems(policy).join('\n')).toContain(message)
  })

  it('refuses `rateLimits.redis: cache` without cache.redis, and bad trustedProxies', () => {
    const ok = limit('    key: ip\n    rate: 1/second')
    expect(problems(ok, { rateLimits: { redis: 'cache' } }).join('\n')).toContain(
      'rateLimits.redis: "cache" needs cache.redis',
    )
    expect(problems(ok, { trustedProxies: ['10.0.0.0/33'] }).join('\n')).toContain(
      'expected an IP address or CIDR',
    )
    expect(problems(ok, { trustedProxies: ['10.0.0.0/8', '::1'] })).toEqual([])
  })

  it('accepts a claim key with auth', () => {
    expect(problems(limit('    key: claim:sub\n    rate: 1/second'), AUTH)).toEqual([])
  })
})

describe('explain shows the limits that apply', () => {
  const POLICY = `
rules:
  - name: all
    servers: ["*"]
    allow: { tools: ["*"] }
limits:
  - name: per-user-calls
    servers: ["*"]
    tools: ["*"]
    key: claim:sub
    rate: 120/minute
    burst: 20
  - name: expensive-renders
    servers: [media]
    tools: ["render_*"]
    key: claim:sub
    concurrency: 2
  - name: eng-lists
    servers: [media]
    methods: [tools/list]
    when: { claims: { groups: eng } }
    key: none
    rate: 10/second
`
  function explain(...args: string[]): { out: string; code: number } {
    let out = ''
    const code = explainCommand(configWith(POLICY, AUTH), ['--server', 'media', ...args], {
      out: (t) => (out += t),
      err: (t) => (out += t),
    })
    return { out, code }
  }

  it('lists rate and concurrency limits for a tool', () => {
    const { out, code } = explain('--tool', 'render_video', '--claims', '{"sub":"a"}')
    expect(code).toBe(0)
    expect(out).toContain(
      'limits: per-user-calls (rate 120/minute, burst 20, key claim:sub; policies/limits.yaml limits[0]); expensive-renders (concurrency 2, key claim:sub; policies/limits.yaml limits[1])\n',
    )
  })

  it('matches methods and when.claims, in JSON too', () => {
    expect(explain('--tool', 'get_x').out).toContain('limits: per-user-calls (')
    const eng = explain(
      '--method',
      'tools/list',
      '--claims',
      '{"sub":"a","groups":["eng"]}',
      '--json',
    )
    expect(JSON.parse(eng.out).limits).toEqual([
      {
        name: 'eng-lists',
        source: 'policies/limits.yaml limits[2]',
        key: 'none',
        rate: '10/second',
        burst: 10,
      },
    ])
    expect(explain('--method', 'tools/list', '--claims', '{"sub":"a"}').out).toContain(
      'limits: (none)\n',
    )
  })
})

describe('key: ip', () => {
  it.each([
    [
      'no trusted proxies: the peer, whatever the header says',
      [],
      '10.0.0.1',
      '1.2.3.4',
      '10.0.0.1',
    ],
    [
      'a trusted peer: the first untrusted hop from the right',
      ['10.0.0.0/8'],
      '10.0.0.1',
      '6.6.6.6, 1.2.3.4, 10.0.0.2',
      '1.2.3.4',
    ],
    ['an untrusted peer: its header is ignored', ['10.0.0.0/8'], '9.9.9.9', '1.2.3.4', '9.9.9.9'],
    ['a trusted peer without the header', ['10.0.0.0/8'], '10.0.0.1', undefined, '10.0.0.1'],
    ['a malformed hop ends the walk', ['10.0.0.0/8'], '10.0.0.1', '1.2.3.4, nonsense', '10.0.0.1'],
    ['IPv4-mapped peers count as IPv4', ['10.0.0.0/8'], '::ffff:10.0.0.1', '1.2.3.4', '1.2.3.4'],
    ['IPv6 ranges', ['2001:db8::/32'], '2001:db8::1', '2001:db9::5', '2001:db9::5'],
  ] as const)('%s', (_label, trusted, peer, xff, expected) => {
    expect(clientAddress(trusted)(peer, xff)).toBe(expected)
  })
})
