/**
 * The fleet curves of `npm run bench:scale` (scale.ts), from outside the built gateway: virtual
 * servers of 2 → 50 members (50 tools each; a merged `tools/list` and a routed `tools/call`), and
 * gateways of 1 → 200 servers (the admin listener's status.json and /metrics). With
 * `BENCH_SCALE_HEAP=1`, the members gateway's live JS heap is read from two heap snapshots
 * (heap-snapshot.ts): what listing the members holds, per listed tool.
 */
import { mkdirSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { request } from 'undici'
import { heapSnapshotBytes, heapSnapshotFlags } from './heap-snapshot.js'
import { cpuTicks } from './proc.js'
import { rssMb, runLoad, spread, stop, timedGateway, warmUp, type Scale } from './scale-load.js'

const MEMBERS = [2, 10, 25, 50]
const SERVERS = [1, 10, 50, 200]
const TOOLS_PER_MEMBER = 50
const ADMIN_TOKEN = 'scale-bench-admin-token'
/**
 * Heap snapshots of the members gateway only on request: taking one leaves the gateway's RSS
 * 75–90 MB higher (memory that writing it took outside the JS heap), and every RSS reading after
 * it would carry that.
 */
const HEAP = process.env['BENCH_SCALE_HEAP'] === '1'

/** What the fleet curves add to the report: markdown lines and the raw figures. */
export interface FleetReport {
  readonly lines: readonly string[]
  readonly json: Readonly<Record<string, unknown>>
}

const PROTOCOL = '2026-07-28'
const META = {
  'io.modelcontextprotocol/protocolVersion': PROTOCOL,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1' },
}

function mcp(method: string, params: Record<string, unknown>, name?: string) {
  return {
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL,
      'mcp-method': method,
      ...(name !== undefined && { 'mcp-name': name }),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: META } }),
  }
}

const toolName = (member: number, j: number): string =>
  `m${member}_tool_${String(j).padStart(4, '0')}`

async function post(url: string, req: ReturnType<typeof mcp>): Promise<Record<string, unknown>> {
  const res = await request(url, { method: 'POST', headers: req.headers, body: req.body })
  const body = (await res.body.json()) as Record<string, unknown>
  if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${JSON.stringify(body)}`)
  return body
}

interface MemberPoint {
  readonly members: number
  readonly listCpuUs: { median: number; least: number }
  readonly listMs: number
  readonly callCpuUs: { median: number; least: number }
}

/**
 * The live JS heap the members gateway holds for the lists it merged: snapshots before and after
 * the first merged list of every virtual server but the smallest (whose list and call are the
 * warm-up, so first-call code and every upstream connection are in both).
 */
interface MemberHeap {
  readonly beforeMb: number
  readonly afterMb: number
  readonly deltaMb: number
  /** Member slots and tools listed between the two snapshots. */
  readonly slots: number
  readonly tools: number
  readonly perToolKb: number
  readonly perSlotKb: number
  /** Wall time the two snapshots took (written by the gateway, read here). */
  readonly seconds: number
  /** Gateway RSS just before and after the first snapshot, MB: what taking one leaves in RSS. */
  readonly rssAroundFirstMb: readonly number[]
}

/** One gateway with a virtual server per point, all over the same members. */
async function membersCurve(
  s: Scale,
): Promise<{ points: MemberPoint[]; rss: number[]; heap: MemberHeap | undefined }> {
  const most = Math.max(...MEMBERS)
  const servers = Object.fromEntries(
    Array.from({ length: most }, (_, i) => [
      `m${i}`,
      { upstreams: [{ url: `${s.backend}/m/${i}?tools=${TOOLS_PER_MEMBER}` }] },
    ]),
  )
  const virtualServers = Object.fromEntries(
    MEMBERS.map((n) => [`v${n}`, { members: Array.from({ length: n }, (_, i) => `m${i}`) }]),
  )
  // Snapshots go to a folder of this run, not the gateway's working directory (the repository).
  // launchGateway reads the flags from the environment once it has a port: set until this
  // gateway is up, for it only.
  const heapDir = join(s.configDir, 'heap')
  mkdirSync(heapDir, { recursive: true })
  const flags = process.env['BENCH_GATEWAY_FLAGS']
  if (HEAP) process.env['BENCH_GATEWAY_FLAGS'] = `${flags ?? ''} ${heapSnapshotFlags(heapDir)}`
  let launched: Awaited<ReturnType<typeof timedGateway>>
  try {
    launched = await timedGateway(s, 'virtual', (port) => ({
      listen: { host: '127.0.0.1', port },
      servers,
      virtualServers,
    }))
  } finally {
    if (flags === undefined) delete process.env['BENCH_GATEWAY_FLAGS']
    else process.env['BENCH_GATEWAY_FLAGS'] = flags
  }
  const { gw, pids } = launched
  const rss = [rssMb(gw.child.pid)]
  const list = mcp('tools/list', {})
  const calls = MEMBERS.map((n) => {
    const name = toolName(n - 1, TOOLS_PER_MEMBER - 1)
    return mcp('tools/call', { name, arguments: { q: 'x' } }, name)
  })
  const listAndCall = async (i: number, n: number): Promise<void> => {
    const listed = (await post(`${gw.baseUrl}/mcp/v${n}`, list)).result as { tools: unknown[] }
    if (listed.tools.length !== n * TOOLS_PER_MEMBER)
      throw new Error(`v${n}: ${listed.tools.length} tools, expected ${n * TOOLS_PER_MEMBER}`)
    const called = await post(`${gw.baseUrl}/mcp/v${n}`, calls[i] as ReturnType<typeof mcp>)
    if (called.error !== undefined) throw new Error(`v${n}: ${JSON.stringify(called.error)}`)
  }
  // Warm-up before the first snapshot: a call straight to every member server (its upstream
  // connection, its per-server state) and the smallest virtual server's list and routed call (the
  // code of merging and routing), so that the heap between the snapshots is the lists'.
  let first: { bytes: number; ms: number; rssAroundMb: number[] } | undefined
  if (HEAP) {
    for (let m = 0; m < most; m++) {
      const name = toolName(m, 0)
      await post(`${gw.baseUrl}/mcp/m${m}`, mcp('tools/call', { name, arguments: {} }, name))
    }
    await listAndCall(0, MEMBERS[0] ?? 0)
    const rssAroundMb = [rssMb(gw.child.pid)]
    const t0 = performance.now()
    const bytes = await heapSnapshotBytes(gw.child.pid, heapDir, gw.baseUrl)
    first = {
      bytes,
      ms: performance.now() - t0,
      rssAroundMb: [...rssAroundMb, rssMb(gw.child.pid)],
    }
  }
  // Every merged list whole, and the routed call known, before anything is timed.
  for (const [i, n] of MEMBERS.entries()) await listAndCall(i, n)
  rss.push(rssMb(gw.child.pid))
  let heap: MemberHeap | undefined
  if (first !== undefined) {
    const t1 = performance.now()
    const after = await heapSnapshotBytes(gw.child.pid, heapDir, gw.baseUrl)
    const delta = after - first.bytes
    const slots = MEMBERS.slice(1).reduce((sum, n) => sum + n, 0)
    const tools = slots * TOOLS_PER_MEMBER
    heap = {
      beforeMb: first.bytes / 2 ** 20,
      afterMb: after / 2 ** 20,
      deltaMb: delta / 2 ** 20,
      slots,
      tools,
      perToolKb: delta / tools / 1024,
      perSlotKb: delta / slots / 1024,
      seconds: (first.ms + performance.now() - t1) / 1000,
      rssAroundFirstMb: first.rssAroundMb,
    }
  }
  for (const [i, n] of MEMBERS.entries()) {
    await warmUp(s, `${gw.baseUrl}/mcp/v${n}`, list, pids, 4)
    await warmUp(s, `${gw.baseUrl}/mcp/v${n}`, calls[i] as ReturnType<typeof mcp>, pids)
  }
  const listCpu = MEMBERS.map(() => [] as number[])
  const listMs = MEMBERS.map(() => [] as number[])
  const callCpu = MEMBERS.map(() => [] as number[])
  for (let r = 0; r < s.rounds; r++) {
    const order = r % 2 === 0 ? [...MEMBERS.keys()] : [...MEMBERS.keys()].reverse()
    for (const i of order) {
      const url = `${gw.baseUrl}/mcp/v${MEMBERS[i] ?? 0}`
      const common = { url, pids, clkTck: s.clkTck, warmupMs: s.warmupMs, durationMs: s.windowMs }
      const lists = await runLoad({ ...common, ...list, connections: 4 })
      const routed = await runLoad({
        ...common,
        ...(calls[i] as ReturnType<typeof mcp>),
        connections: 16,
      })
      if (lists.failures + routed.failures > 0) throw new Error(`${url}: failures under load`)
      listCpu[i]?.push(lists.cpuUsPerRequest)
      callCpu[i]?.push(routed.cpuUsPerRequest)
      const window = latencies(lists)
      listMs[i]?.push(spread(window).median)
    }
  }
  rss.push(rssMb(gw.child.pid))
  await stop(gw)
  return {
    points: MEMBERS.map((members, i) => ({
      members,
      listCpuUs: spread(listCpu[i] as number[]),
      listMs: spread(listMs[i] as number[]).median,
      callCpuUs: spread(callCpu[i] as number[]),
    })),
    rss,
    heap,
  }
}

function latencies(r: Awaited<ReturnType<typeof runLoad>>): number[] {
  const out: number[] = []
  for (let i = 0; i < r.count; i++) {
    const end = r.ends[i] as number
    if (end >= r.windowStartMs && end < r.windowEndMs) out.push(r.latencies[i] as number)
  }
  return out
}

interface ServerPoint {
  readonly servers: number
  readonly startMs: number
  readonly rssMb: number
  readonly statusMs: number
  readonly statusBytes: number
  readonly statusCpuUs: number
  readonly metricsMs: number
  readonly metricsBytes: number
  readonly metricsCpuUs: number
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const a = server.address()
      server.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0))
    })
  })
}

/** Times `count` GETs one after another: median ms, bytes, gateway CPU per GET (µs). */
async function gets(
  url: string,
  count: number,
  pids: readonly number[],
  clkTck: number,
): Promise<{ ms: number; bytes: number; cpuUs: number }> {
  const times: number[] = []
  let bytes = 0
  const ticks = cpuTicks(pids)
  for (let i = 0; i < count; i++) {
    const t0 = performance.now()
    const res = await request(url, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    const body = await res.body.arrayBuffer()
    if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode}`)
    times.push(performance.now() - t0)
    bytes = body.byteLength
  }
  const cpuUs = ((cpuTicks(pids) - ticks) * 1e6) / clkTck / count
  return { ms: spread(times).median, bytes, cpuUs }
}

/** A gateway per point; each server is called once, so every per-server series exists. */
async function serversCurve(s: Scale): Promise<ServerPoint[]> {
  const out: ServerPoint[] = []
  const count = s.windowMs > 1000 ? 40 : 10
  for (const n of SERVERS) {
    const adminPort = await freePort()
    const servers = Object.fromEntries(
      Array.from({ length: n }, (_, i) => [`s${i}`, { upstreams: [{ url: `${s.backend}/mcp` }] }]),
    )
    const { gw, startMs, pids } = await timedGateway(s, `servers-${n}`, (port) => ({
      listen: { host: '127.0.0.1', port },
      admin: { host: '127.0.0.1', port: adminPort, token: ADMIN_TOKEN },
      servers,
    }))
    const call = mcp('tools/call', { name: 'get_forecast', arguments: {} }, 'get_forecast')
    for (let i = 0; i < n; i++) await post(`${gw.baseUrl}/mcp/s${i}`, call)
    const admin = `http://127.0.0.1:${adminPort}`
    await gets(`${admin}/status.json`, 10, pids, s.clkTck)
    await gets(`${admin}/metrics`, 10, pids, s.clkTck)
    const status = await gets(`${admin}/status.json`, count, pids, s.clkTck)
    const metrics = await gets(`${admin}/metrics`, count, pids, s.clkTck)
    out.push({
      servers: n,
      startMs,
      rssMb: rssMb(gw.child.pid),
      statusMs: status.ms,
      statusBytes: status.bytes,
      statusCpuUs: status.cpuUs,
      metricsMs: metrics.ms,
      metricsBytes: metrics.bytes,
      metricsCpuUs: metrics.cpuUs,
    })
    await stop(gw)
  }
  return out
}

const f = (x: number, digits = 0): string => (Number.isNaN(x) ? '–' : x.toFixed(digits))

/** The fleet curves asked for, as report lines and raw figures. */
export async function fleetCurves(
  s: Scale,
  withMembers: boolean,
  withServers: boolean,
): Promise<FleetReport> {
  const members = withMembers ? await membersCurve(s) : { points: [], rss: [], heap: undefined }
  const servers = withServers ? await serversCurve(s) : []
  const m0 = members.points[0]
  const perMember = (p: MemberPoint): number => p.listCpuUs.median / p.members
  const lines: string[] = []
  if (m0 !== undefined)
    lines.push(
      `### Virtual members (${TOOLS_PER_MEMBER} tools each), the built gateway from outside`,
      '',
      '| members | merged tools/list CPU µs (median / least) | per member µs | ÷ 2 members | list p50 ms | routed tools/call CPU µs (median / least) | ÷ 2 members |',
      '|---:|---:|---:|---:|---:|---:|---:|',
      ...members.points.map(
        (p) =>
          `| ${p.members} | ${f(p.listCpuUs.median)} / ${f(p.listCpuUs.least)} | ${f(perMember(p))} | ${f(perMember(p) / perMember(m0), 2)} | ${f(p.listMs, 2)} | ${f(p.callCpuUs.median)} / ${f(p.callCpuUs.least)} | ${f(p.callCpuUs.median / m0.callCpuUs.median, 2)} |`,
      ),
      '',
      `Gateway RSS: ${members.rss.map((x) => f(x, 1)).join(' → ')} MB (started; every merged list and routed call made once; after the load).`,
      '',
    )
  const heap = members.heap
  if (heap !== undefined)
    lines.push(
      `Gateway live JS heap (heap snapshots): ${f(heap.beforeMb, 1)} → ${f(heap.afterMb, 1)} MB, +${f(heap.deltaMb, 2)} MB for the first list and call of ${heap.slots} member slots (${heap.tools} tools; the ${MEMBERS[0] ?? 0}-member list, a call to every member server before): ${f(heap.perToolKb, 2)} KB per listed tool, ${f(heap.perSlotKb, 1)} KB per member slot. The snapshots took ${f(heap.seconds, 1)} s; the first raised RSS ${heap.rssAroundFirstMb.map((x) => f(x, 1)).join(' → ')} MB, which the RSS readings after it carry.`,
      '',
    )
  if (servers.length > 0)
    lines.push(
      '### Servers, the built gateway from outside',
      '',
      '| servers | serving after ms | RSS MB | status.json ms | bytes | CPU µs | /metrics ms | bytes | CPU µs |',
      '|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...servers.map(
        (p) =>
          `| ${p.servers} | ${f(p.startMs)} | ${f(p.rssMb, 1)} | ${f(p.statusMs, 2)} | ${p.statusBytes} | ${f(p.statusCpuUs)} | ${f(p.metricsMs, 2)} | ${p.metricsBytes} | ${f(p.metricsCpuUs)} |`,
      ),
      '',
    )
  return { lines, json: { members, servers } }
}
