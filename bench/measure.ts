/**
 * One bench cell: continuous autocannon load, with a measured window cut out of the middle of it.
 * The window is ours, not autocannon's (its stop only lands on the next sample tick): CPU ticks,
 * hrtime and the response count are all taken at the same two instants, so requests and CPU time
 * refer to exactly the same interval and there is no reconnect gap after the warm-up.
 */
import autocannon, { type Instance } from 'autocannon'
import { backendRequests } from './check.js'
import { cpuTicks } from './proc.js'
import { buildRequest, type BenchMethod } from './requests.js'

/** What the runner asks the load worker to do. */
export interface CellSpec {
  readonly url: string
  readonly method: BenchMethod
  readonly connections: number
  readonly warmupS: number
  readonly durationS: number
  readonly clkTck: number
  /** Pids whose CPU is charged to the gateway (empty for the direct target) and to the backend. */
  readonly gatewayPids: readonly number[]
  readonly backendPids: readonly number[]
  readonly backendStatsUrl: string
  /** Extra request headers (a bearer token). */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/** Raw figures of one cell; ratios are derived later by the runner. */
export interface CellMeasurement {
  readonly windowS: number
  readonly requests: number
  readonly rps: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly gatewayCpuUsPerReq: number | null
  readonly backendCpuUsPerReq: number
  /** Backend requests per client response over the run: 1 when forwarding, ~0 on cache hits. */
  readonly backendPerResponse: number
  readonly non2xx: number
  readonly errors: number
  /** The load generator's own CPU use in the window; near 100 % means the client is the limit. */
  readonly clientCpuPct: number
}

/** Runs the cell; resolves after the load has fully stopped. */
export async function measureCell(spec: CellSpec): Promise<CellMeasurement> {
  const { headers, body } = buildRequest(spec.method)
  const statsBefore = await backendRequests(spec.backendStatsUrl)
  const latencies = new LatencyLog()
  let inWindow = false
  let stopped = false
  let responses = 0
  let windowResponses = 0
  let non2xx = 0
  let errors = 0
  const options = {
    url: spec.url,
    method: 'POST',
    headers: { ...headers, ...spec.headers },
    body,
    connections: spec.connections,
    pipelining: 1,
    // Upper bound only: the window below ends the run. Short sample ticks make stop() land quickly.
    duration: spec.warmupS + spec.durationS + 5,
    sampleInt: 100,
    timeout: 10,
  }
  let instance: Instance | undefined
  const done = new Promise<void>((resolve, reject) => {
    instance = autocannon(options, (err) => (err ? reject(err) : resolve()))
  })
  done.catch(() => undefined) // rethrown by `await done` below; this only avoids an early crash
  if (instance === undefined) throw new Error('autocannon did not start')
  // Responses keep counting after stop() (until autocannon's next tick): the backend saw those too.
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    responses++
    const ok = status >= 200 && status < 300
    if (!ok) non2xx++
    if (!inWindow) return
    windowResponses++
    if (ok) latencies.add(ms)
  })
  // Socket errors after stop() are autocannon tearing its own connections down.
  instance.on('reqError', () => void (stopped || errors++))

  await sleep(spec.warmupS * 1000)
  const start = sample(spec)
  inWindow = true
  await sleep(spec.durationS * 1000)
  const end = sample(spec)
  inWindow = false
  stopped = true
  instance.stop()
  await done
  const statsAfter = await backendRequests(spec.backendStatsUrl)

  const windowS = Number(end.at - start.at) / 1e9
  const usPerTick = 1e6 / spec.clkTck
  const perReq = (ticks: number): number =>
    windowResponses > 0 ? (ticks * usPerTick) / windowResponses : NaN
  const clientUs = end.client.user + end.client.system - start.client.user - start.client.system
  return {
    windowS,
    requests: windowResponses,
    rps: windowResponses / windowS,
    p50Ms: latencies.percentile(50),
    p99Ms: latencies.percentile(99),
    gatewayCpuUsPerReq: spec.gatewayPids.length > 0 ? perReq(end.gateway - start.gateway) : null,
    backendCpuUsPerReq: perReq(end.backend - start.backend),
    backendPerResponse: responses > 0 ? (statsAfter - statsBefore) / responses : NaN,
    non2xx,
    errors,
    clientCpuPct: (clientUs / 1e6 / windowS) * 100,
  }
}

interface Sample {
  readonly at: bigint
  readonly gateway: number
  readonly backend: number
  readonly client: NodeJS.CpuUsage
}

// Reads are a few µs each; hrtime sits between them so all three describe the same instant.
function sample(spec: CellSpec): Sample {
  const gateway = cpuTicks(spec.gatewayPids)
  const at = process.hrtime.bigint()
  const backend = cpuTicks(spec.backendPids)
  return { at, gateway, backend, client: process.cpuUsage() }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** Latencies in ms at full float precision (autocannon's histogram rounds to whole ms). */
class LatencyLog {
  private values = new Float64Array(1 << 16)
  private count = 0

  add(ms: number): void {
    if (this.count === this.values.length) {
      const grown = new Float64Array(this.values.length * 2)
      grown.set(this.values)
      this.values = grown
    }
    this.values[this.count++] = ms
  }

  /** Nearest-rank percentile; NaN when nothing succeeded. */
  percentile(p: number): number {
    if (this.count === 0) return NaN
    const sorted = this.values.subarray(0, this.count).sort()
    return sorted[Math.min(this.count - 1, Math.ceil((p / 100) * this.count) - 1)] ?? NaN
  }
}
