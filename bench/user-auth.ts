/**
 * What a stored user token costs a call (docs/auth.md §Per-user credentials): the work a call to a
 * `userAuth` server does before its plan that a call to a server with a static `headers:`
 * credential does not: the endpoint's credentials step (endpoint/exchange.ts `credentialsFor`:
 * the requestState check, the user's held copy, the `Authorization` value) and the plan built
 * with it, against the same plan built with the static header, same request, same run. In
 * process, alternating rounds, median CPU time per call, awaited as the endpoint's send awaits
 * it, so the figure holds on a busy machine. Run: `npm run bench:user-auth`. Target: at most 5 µs
 * more.
 */
import { randomBytes } from 'node:crypto'
import { pino } from 'pino'
import { AuthCarryOver } from '../src/auth/carry-over.js'
import { compileAuth } from '../src/auth/compile.js'
import type { Principal } from '../src/auth/principal.js'
import type { EndpointCall } from '../src/endpoint/call.js'
import { credentialsFor, withAuth } from '../src/endpoint/exchange.js'
import { planAttempt, type PlanOptions, type PlanServer } from '../src/endpoint/plan.js'
import type { McpRequestInfo } from '../src/mcp/classify.js'
import { parseMessage } from '../src/mcp/jsonrpc.js'
import { compileHeaderRules } from '../src/mcp/owned-headers.js'
import { readRequestHead } from '../src/mcp/request-head.js'
import { createMetrics } from '../src/observability/metrics.js'
import { parseConfigText } from '../src/runtime/load.js'
import { ServerBalancing } from '../src/upstream/balancing.js'
import { Lifecycle } from '../src/upstream/lifecycle.js'
import { UserAuth } from '../src/userauth/user-auth.js'

const CALLS = Number(process.env['BENCH_USER_AUTH_CALLS'] ?? 50_000)
const ROUNDS = Number(process.env['BENCH_USER_AUTH_ROUNDS'] ?? 15)

const ISS = 'https://idp.example.com'
// A token of the size services issue (a JWT of ~900 bytes), for both credentials alike.
const TOKEN = randomBytes(675).toString('base64url')
const CONFIG = `
auth:
  publicUrl: https://mcp.example.com
  jwt: { issuer: "${ISS}", jwksUrl: "https://idp.example.com/jwks" }
userTokens:
  key: ${randomBytes(32).toString('base64')}
  login: { clientId: connect }
servers:
  tracker:
    upstreams: [{ url: "http://127.0.0.1:1/mcp" }]
    userAuth: { issuer: "https://as.example.com", clientId: gw }
  static:
    upstreams: [{ url: "http://127.0.0.1:1/mcp" }]
    headers: { Authorization: "Bearer ${TOKEN}" }
`
const { config } = parseConfigText(CONFIG, { dir: '.' })
const users = new UserAuth()
const auth = compileAuth(config, '.', new AuthCarryOver({ users }))
if (auth === undefined) throw new Error('no auth')

function server(name: 'tracker' | 'static'): PlanServer {
  const cfg = config.servers[name]!
  const headers = Object.entries(cfg.headers).flat()
  const balancing = new ServerBalancing(name, cfg, headers, {
    log: pino({ level: 'silent' }),
    metrics: createMetrics(false),
    lifecycle: new Lifecycle(),
    sessionKey: Buffer.alloc(32, 7),
  })
  return { name, balancing, upstreamHeaders: headers, classify: { maxDepth: 64 } }
}

const principal: Principal = {
  issuer: ISS,
  subject: 'alice',
  claims: { iss: ISS, sub: 'alice' },
  scopes: new Set(['mcp:tools']),
  token: 'caller-token',
}
const envelope = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } },
}
const body = Buffer.from(
  JSON.stringify({
    jsonrpc: '2.0',
    id: 7,
    method: 'tools/call',
    params: { name: 'list_issues', arguments: { project: 'edge', state: 'open' }, _meta: envelope },
  }),
)
const mcp: McpRequestInfo = {
  era: 'modern',
  version: '2026-07-28',
  method: 'tools/call',
  kind: 'request',
  targets: [{ kind: 'tool', name: 'list_issues' }],
  verified: true,
  message: parseMessage(body, 64),
}
const call: EndpointCall = {
  http: 'POST',
  requestId: 'bench',
  mcp,
  head: readRequestHead(
    ['Host', 'mcp.example.com', 'Mcp-Method', 'tools/call', 'Mcp-Name', 'list_issues'],
    compileHeaderRules([], undefined),
  ),
  body,
  principal,
  peer: '127.0.0.1',
  headers: {},
  trace: undefined,
  span: () => ({}) as ReturnType<EndpointCall['span']>,
}
const opts: PlanOptions = { tasks: 'none', maxInspectBytes: 1 << 20, maxStreams: 20 }
const tracker = server('tracker')
const fixed = server('static')

// alice connected once (what the connect page stores), in the in-memory store.
await users.sourceFor('tracker', config).connect(ISS, 'alice', {
  accessToken: TOKEN,
  refreshToken: 'refresh',
  expiresIn: 3600,
  scope: undefined,
  idToken: undefined,
})

let sink = 0

/** The static credential: the plan, as the endpoint's send builds it with no credentials step. */
async function staticSend(): Promise<number> {
  const p = planAttempt(fixed, call, opts)
  return p.kind === 'plan' ? p.plan.headers.length : 0
}

/** The user's token: the endpoint's credentials step, then the plan with its Authorization. */
async function userSend(): Promise<number> {
  const creds = await credentialsFor(auth, 'tracker', call)
  if (creds.kind === 'answer') throw new Error('not connected')
  const p = planAttempt(tracker, creds.call, withAuth(opts, creds.auth))
  return p.kind === 'plan' ? p.plan.headers.length : 0
}

/** CPU (user + system) per call in ns: on a shared machine wall time counts other processes. */
async function time(send: () => Promise<number>): Promise<number> {
  const start = process.cpuUsage()
  for (let i = 0; i < CALLS; i++) sink += await send()
  const used = process.cpuUsage(start)
  return ((used.user + used.system) * 1000) / CALLS
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] as number
}

// SECURITY of the figure: both send the same Authorization, or the bench times something else.
const a = planAttempt(fixed, call, opts)
const creds = await credentialsFor(auth, 'tracker', call)
if (creds.kind !== 'send' || a.kind !== 'plan') throw new Error('no plan')
const b = planAttempt(tracker, creds.call, withAuth(opts, creds.auth))
const authOf = (h: readonly string[]) =>
  h[h.findIndex((x) => x.toLowerCase() === 'authorization') + 1]
if (b.kind !== 'plan' || authOf(a.plan.headers) !== authOf(b.plan.headers))
  throw new Error('the two credentials differ')

for (let i = 0; i < 3; i++) {
  await time(userSend)
  await time(staticSend)
}
const user: number[] = []
const plain: number[] = []
const diffs: number[] = []
for (let r = 0; r < ROUNDS; r++) {
  const before = await time(staticSend)
  const u = await time(userSend)
  const after = await time(staticSend)
  plain.push(before, after)
  user.push(u)
  diffs.push(u - (before + after) / 2)
}
const cost = median(diffs)
console.log(
  '| call | static `headers:` credential | stored user token | user token per call | target ≤ 5 µs |',
)
console.log('|---|---|---|---|---|')
console.log(
  `| tools/call, ${body.length}-byte body | ${(median(plain) / 1000).toFixed(2)} µs | ${(median(user) / 1000).toFixed(2)} µs | ${(cost / 1000).toFixed(2)} µs | ${cost <= 5_000 ? 'ok' : 'over 5 µs'} |`,
)
await users.close()
if (sink === 0) console.log('')
process.exit(0)
