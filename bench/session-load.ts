/**
 * The agent-session load of `npm run bench:system`: `concurrency` loops, each running sessions of
 * `server/discover`, `tools/list` and three `tools/call` (2026-07-28 requests, as the v2 SDK sends
 * them) back to back against one MCP endpoint. The CPU of the given pids is read at the measured
 * window's edges, as in measure.ts. Prints one `RESULT <json>` line and exits.
 *
 * Usage: node --import tsx bench/session-load.ts '<SessionSpec as JSON>'
 */
import { Pool } from 'undici'
import { cpuTicks } from './proc.js'

/** What the runner asks for. */
export interface SessionSpec {
  readonly url: string
  readonly concurrency: number
  readonly warmupS: number
  readonly durationS: number
  readonly clkTck: number
  /** The gateway's pids (empty when direct) and the backend's. */
  readonly gatewayPids: readonly number[]
  readonly backendPids: readonly number[]
}

/** One window's figures. */
export interface SessionResult {
  readonly windowS: number
  readonly sessions: number
  readonly requests: number
  readonly sessionsPerS: number
  readonly gatewayCpuUsPerSession: number | null
  readonly backendCpuUsPerSession: number
  /** p50 of a whole session, ms. */
  readonly sessionP50Ms: number
  readonly failures: number
}

const VERSION = '2026-07-28'
const META = {
  'io.modelcontextprotocol/protocolVersion': VERSION,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'bench-agent', version: '1' },
}

interface Step {
  readonly method: string
  readonly params: Record<string, unknown>
  readonly headers: Record<string, string>
}

const call = (name: string, args: Record<string, string>, extra: Record<string, string> = {}) => ({
  method: 'tools/call',
  params: { name, arguments: args },
  headers: { 'mcp-name': name, ...extra },
})

/** One agent session: discover, list, three calls (one with an x-mcp-header argument). */
const SESSION: readonly Step[] = [
  { method: 'server/discover', params: {}, headers: {} },
  { method: 'tools/list', params: {}, headers: {} },
  call('get_forecast', { city: 'Paris' }),
  call('get_alerts', { region: 'Bretagne' }, { 'mcp-param-region': 'Bretagne' }),
  call('get_forecast', { city: 'Lyon' }),
]

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as SessionSpec
  const url = new URL(spec.url)
  const pool = new Pool(url.origin, { connections: spec.concurrency, keepAliveTimeout: 60_000 })
  let nextId = 0
  let inWindow = false
  let running = true
  let sessions = 0
  let requests = 0
  let failures = 0
  const durations: number[] = []
  const firstFailure: string[] = []

  async function post(step: Step): Promise<void> {
    const id = nextId++
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: step.method,
      params: { ...step.params, _meta: META },
    })
    const res = await pool.request({
      path: url.pathname,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': VERSION,
        'mcp-method': step.method,
        ...step.headers,
      },
      body,
    })
    const text = await res.body.text()
    if (res.statusCode !== 200 || !text.includes('"result"') || text.includes('"error":{')) {
      failures++
      if (firstFailure.length === 0)
        firstFailure.push(`${step.method} → ${res.statusCode}: ${text.slice(0, 300)}`)
    }
  }

  async function loop(): Promise<void> {
    while (running) {
      const started = performance.now()
      for (const step of SESSION) {
        await post(step)
        if (inWindow) requests++
      }
      if (inWindow) {
        sessions++
        durations.push(performance.now() - started)
      }
    }
  }

  const loops = Array.from({ length: spec.concurrency }, () => loop())
  await sleep(spec.warmupS * 1000)
  const start = sample(spec)
  inWindow = true
  await sleep(spec.durationS * 1000)
  const end = sample(spec)
  inWindow = false
  running = false
  await Promise.all(loops)
  await pool.close()

  const windowS = Number(end.at - start.at) / 1e9
  const usPerTick = 1e6 / spec.clkTck
  const perSession = (ticks: number): number =>
    sessions > 0 ? (ticks * usPerTick) / sessions : NaN
  durations.sort((a, b) => a - b)
  const result: SessionResult = {
    windowS,
    sessions,
    requests,
    sessionsPerS: sessions / windowS,
    gatewayCpuUsPerSession:
      spec.gatewayPids.length > 0 ? perSession(end.gateway - start.gateway) : null,
    backendCpuUsPerSession: perSession(end.backend - start.backend),
    sessionP50Ms: durations[Math.floor(durations.length / 2)] ?? NaN,
    failures,
  }
  if (firstFailure.length > 0) process.stderr.write(`first failure: ${firstFailure[0]}\n`)
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
}

function sample(spec: SessionSpec): { at: bigint; gateway: number; backend: number } {
  const gateway = cpuTicks(spec.gatewayPids)
  const at = process.hrtime.bigint()
  return { at, gateway, backend: cpuTicks(spec.backendPids) }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

void main()
