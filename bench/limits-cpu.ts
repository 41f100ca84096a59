/**
 * CPU a rate limit adds to one request, in process: the same hono route with and without the
 * admission stage (one local limit that applies and is never reached), timed with
 * process.cpuUsage over many requests, alternating, median of rounds. It isolates the stage from
 * sockets and the backend, so the figure holds on a busy machine where `npm run bench`'s
 * per-request CPU is noisy. Run: `npm run bench:limits`.
 */
import { Hono, type MiddlewareHandler } from 'hono'
import pino from 'pino'
import type { GatewayEnv } from '../src/pipeline/env.js'
import { Limiter } from '../src/limits/limiter.js'
import { compileLimit } from '../src/limits/rules.js'
import { LimitState } from '../src/limits/state.js'
import { createAuditLog } from '../src/observability/audit.js'
import { createMetrics } from '../src/observability/metrics.js'
import { compileEndpoints } from '../src/endpoint/endpoint.js'
import { admitRequest } from '../src/pipeline/admit.js'
import { clientAddress } from '../src/limits/client-ip.js'

const REQUESTS = Number(process.env['BENCH_LIMIT_REQUESTS'] ?? 50_000)
const ROUNDS = Number(process.env['BENCH_LIMIT_ROUNDS'] ?? 21)

const limit = compileLimit({
  source: 'bench',
  limit: {
    name: 'bench',
    servers: ['*'],
    tools: ['*'],
    key: 'ip',
    rate: '999999999/second',
    burst: 1_000_000_000,
  },
})
const log = pino({ level: 'silent' })
const limiter = new Limiter([limit], new LimitState({ log }), 1)
const runtime = { clientAddress: clientAddress([]), policy: { id: 'bench' } }
const mcp = {
  era: 'modern',
  method: 'tools/call',
  targets: [{ kind: 'tool', name: 'get_forecast' }],
}

const setVars: MiddlewareHandler<GatewayEnv> = async (c, next) => {
  c.set('mcp', mcp as never)
  c.set('principal', undefined)
  c.set('server', { name: 'bench' } as never)
  c.set('runtime', runtime as never)
  c.set('requestId', 'bench')
  await next()
}

function app(stage: MiddlewareHandler<GatewayEnv> | undefined): Hono<GatewayEnv> {
  const a = new Hono<GatewayEnv>()
  const respond: MiddlewareHandler<GatewayEnv> = async (c) => c.body('ok')
  if (stage === undefined) a.all('/mcp/:server', setVars, respond)
  else a.all('/mcp/:server', setVars, stage, respond)
  return a
}

const env = {
  incoming: { socket: { remoteAddress: '127.0.0.1' }, headers: {} },
  outgoing: { setHeader: () => undefined },
}
const plain = app(undefined)
const audit = createAuditLog(log)
const metrics = createMetrics(false)
const limiting = { limiter, audit, metrics, clientAddress: clientAddress([]), policyId: 'bench' }
// The stage only admits: the server's send is never reached.
const server = { name: 'bench', config: { extraMethods: [] } } as never
const endpoints = compileEndpoints([server], {
  audit,
  metrics,
  policy: undefined,
  limiting,
  tracing: false,
  auth: undefined,
})
const limited = app(admitRequest(endpoints) as MiddlewareHandler<GatewayEnv>)
const req = new Request('http://127.0.0.1/mcp/bench', { method: 'POST' })

async function cpuPerRequest(a: Hono<GatewayEnv>): Promise<number> {
  const start = process.cpuUsage()
  for (let i = 0; i < REQUESTS; i++) await a.fetch(req, env as never)
  const used = process.cpuUsage(start)
  return (used.user + used.system) / REQUESTS
}

const added: number[] = []
let base = 0
for (let round = 0; round < ROUNDS + 1; round++) {
  const without = await cpuPerRequest(plain)
  const withLimit = await cpuPerRequest(limited)
  if (round === 0) continue // warm-up
  added.push(withLimit - without)
  base = without
}
added.sort((x, y) => x - y)
const median = added[Math.floor(added.length / 2)] ?? NaN
console.log(
  `admission stage, one local limit: +${median.toFixed(2)} µs CPU per request ` +
    `(median of ${ROUNDS} rounds of ${REQUESTS}; route without it: ${base.toFixed(2)} µs; ` +
    `all rounds: ${added.map((a) => a.toFixed(2)).join(', ')})`,
)

/**
 * With Redis: the latency one decision adds (one EVALSHA round trip to a local redis-server), at
 * 1 and 64 requests in flight. Skipped when redis-server is not installed.
 */
async function redisLatency(): Promise<void> {
  const { spawn, spawnSync } = await import('node:child_process')
  const { RedisRates } = await import('../src/limits/redis.js')
  const { rateOf } = await import('../src/limits/gcra.js')
  if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status !== 0) {
    console.log('redis: not installed, skipped')
    return
  }
  const port = 20_000 + Math.floor(Math.random() * 30_000)
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']
  const child = spawn('redis-server', args, { stdio: 'ignore' })
  try {
    const rates = new RedisRates({ url: `redis://127.0.0.1:${port}`, log })
    for (let i = 0; i < 100 && !rates.available; i++) await new Promise((r) => setTimeout(r, 50))
    const rate = rateOf(999_999_999, 1000, 1_000_000_000)
    const check = [{ table: 'bench', key: 'bench', rate, capacity: 1 }]
    for (const concurrency of [1, 64]) {
      const samples: number[] = []
      const total = 20_000
      let sent = 0
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (sent++ < total) {
            const t0 = performance.now()
            const r = await rates.decide(check)
            if (r === undefined) throw new Error('redis did not decide')
            samples.push((performance.now() - t0) * 1000)
          }
        }),
      )
      samples.sort((x, y) => x - y)
      const at = (q: number): string => (samples[Math.floor(q * samples.length)] ?? NaN).toFixed(0)
      console.log(
        `redis decision, c=${concurrency}: p50 ${at(0.5)} µs, p99 ${at(0.99)} µs added latency`,
      )
    }
    rates.close()
  } finally {
    child.kill('SIGKILL')
  }
}
await redisLatency()
