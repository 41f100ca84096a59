/**
 * `npm run bench:streams`: memory under many idle `subscriptions/listen` streams, and under load,
 * for the gateway and, in the same run, for the floor proxy (floor.ts) as its scale.
 *
 * 1. RSS of the fresh floor proxy and its peak under sustained tools/call load (c=64) for
 *    BENCH_LOAD_S seconds (default 10): what a bare Node pass-through holds there (V8's young
 *    generation grows to its cap under load). The floor then stays up, idle, for step 6.
 * 2. The same for the fresh gateway (default config, `trustHeaders: false`, access log and cache on).
 * 3. Baseline after that and a few streams opened and closed: RSS, open fds, backend sockets.
 * 4. Opens as many idle listen streams through the gateway as its fd limit allows (each holds two
 *    sockets there: the client's and the upstream one), or BENCH_STREAMS if lower, and reports the
 *    RSS each one adds above the baseline.
 * 5. Closes them all and waits for the gateway's fds, the backend's open streams and its sockets
 *    to come back to the baseline: a stream that leaks a socket, a listener or a slot shows here.
 * 6. Steps 3 to 5 through the floor proxy: the same request, the same number of streams, the same
 *    backend. Its RSS per stream is what any Node proxy pays for holding a stream's two sockets
 *    (node:http server side, undici client side); what the gateway pays above it is its own.
 *
 * The fd limit is the soft RLIMIT_NOFILE, which the gateway and the floor inherit from this
 * process: the npm script raises the soft limit to the hard one first. BENCH_HEAP_SNAPSHOTS=1
 * starts the gateway with `--heapsnapshot-signal=SIGUSR2` and takes a snapshot at the baseline and
 * with the streams open (written into the gateway's working directory, the repository root).
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import ts from 'typescript'
import { runScript, spawnNode, waitForLine, type Child } from './children.js'
import { launchGateway, shippedNodeFlags } from './gateway.js'
import { buildRequest } from './requests.js'
import { startBackend } from './targets.js'

const GATEWAY_CPU = 0
const BACKEND_CPU = 1
/** fds a proxy needs besides the streams: listeners, pools, log, config watcher, margin. */
const FD_RESERVE = 300
const OPEN_AT_ONCE = 200
/** Seconds of one-second RSS samples for a reading at rest (settledSnapshot). */
const SETTLE_SAMPLES = 12
/** floor.ts's default Pool cap, above the c=64 load: the load phase runs as in `npm run bench`. */
const FLOOR_LOAD_CONNECTIONS = 256
const repoRoot = fileURLToPath(new URL('..', import.meta.url))

interface Snapshot {
  readonly rssKb: number
  readonly fds: number
  readonly backendStreams: number
  readonly backendSockets: number
}

/** One proxy holding `streams` idle listen streams: before, with them open, after closing them. */
interface StreamRun {
  readonly baseline: Snapshot
  readonly held: Snapshot
  readonly afterClose: Snapshot
  readonly streams: number
  readonly perStreamKb: number
  readonly openSeconds: number
  readonly closeSeconds: number
  readonly backToBaseline: boolean
}

async function main(): Promise<number> {
  const configDir = mkdtempSync(join(tmpdir(), 'mcp-edge-streams-'))
  process.on('exit', () => rmSync(configDir, { recursive: true, force: true }))
  const snapshots = process.env['BENCH_HEAP_SNAPSHOTS'] === '1'
  if (snapshots) process.env['BENCH_GATEWAY_FLAGS'] = '--heapsnapshot-signal=SIGUSR2'
  const placement = { repoRoot, configDir, gatewayCpu: GATEWAY_CPU, backendCpu: BACKEND_CPU }
  // Idle upstream connections close after 5 s (undici keeps them a second less than the backend's
  // Keep-Alive hint): after the streams close, what is left open past that is a leak.
  const backend = await startBackend(placement, ['--keep-alive-ms', '5000'])
  const gw = await launchGateway(
    { name: 'gateway-streams', repoRoot, configDir, cpu: GATEWAY_CPU },
    (port) => ({
      listen: { host: '127.0.0.1', port },
      servers: {
        // Budgets above what the fd limit allows, so the fd limit is what this run finds.
        bench: { upstreams: [{ url: backend.url }], trustHeaders: false, maxStreams: 100_000 },
      },
      limits: { maxStreamsPerPrincipal: 100_000 },
      log: { level: 'info' },
      cache: {},
    }),
  )
  const pid = gw.child.pid
  const url = new URL(`${gw.baseUrl}/mcp/bench`)
  const fdLimit = softFdLimit(pid)
  const wanted = Number(process.env['BENCH_STREAMS'] ?? Infinity)
  const count = Math.min(wanted, Math.floor((fdLimit - FD_RESERVE) / 2))
  log(`gateway fd limit ${fdLimit}: opening ${count} streams (two fds each)`)

  // Sustained load first, on a gateway that has not held streams yet (RSS never shrinks back
  // after 10,000 streams, so measured after them it would describe the streams, not the load).
  // The floor goes first and stays up, idle, for its own streams after the gateway's: it goes
  // through the same sequence (start, load, warm-up, baseline), so its figures compare.
  const loadS = Number(process.env['BENCH_LOAD_S'] ?? 10)
  const floor = await startFloor(backend.url, count)
  const floorPid = floor.child.pid
  const floorFdLimit = softFdLimit(floorPid)
  if (floorFdLimit < 2 * count + FD_RESERVE) {
    throw new Error(`floor proxy fd limit ${floorFdLimit} is too low for ${count} streams`)
  }
  await settle(1000)
  const floorIdleKb = rssKb(floorPid)
  const floorPeakKb = await rssUnderLoad(floorPid, floor.url, loadS)
  log(
    `floor proxy: RSS idle ${(floorIdleKb / 1024).toFixed(0)} MB; under the same load: ` +
      `peak ${(floorPeakKb / 1024).toFixed(0)} MB`,
  )
  const idleKb = rssKb(pid)
  const peak = await rssUnderLoad(pid, url, loadS)
  log(
    `RSS idle ${(idleKb / 1024).toFixed(0)} MB; under c=64 tools/call for ${loadS} s: ` +
      `peak ${(peak / 1024).toFixed(0)} MB`,
  )

  const gateway = await holdStreams('gateway', pid, url, backend.statsUrl, count, async () => {
    if (snapshots) await heapSnapshot(pid)
  })
  const floorRun = await holdStreams('floor proxy', floorPid, floor.url, backend.statsUrl, count)
  const back = gateway.backToBaseline && floorRun.backToBaseline
  const aboveFloorKb = gateway.perStreamKb - floorRun.perStreamKb

  const report = {
    date: new Date().toISOString(),
    node: process.version,
    fdLimit,
    streams: gateway.streams,
    openSeconds: gateway.openSeconds,
    baseline: gateway.baseline,
    held: gateway.held,
    perStreamKb: gateway.perStreamKb,
    afterClose: gateway.afterClose,
    closeSeconds: gateway.closeSeconds,
    backToBaseline: gateway.backToBaseline,
    floorFdLimit,
    floorStreams: floorRun.streams,
    floorOpenSeconds: floorRun.openSeconds,
    floorBaseline: floorRun.baseline,
    floorHeld: floorRun.held,
    floorRssPerStreamKb: floorRun.perStreamKb,
    floorAfterClose: floorRun.afterClose,
    floorCloseSeconds: floorRun.closeSeconds,
    floorStreamsBackToBaseline: floorRun.backToBaseline,
    perStreamAboveFloorKb: aboveFloorKb,
    idleRssMb: idleKb / 1024,
    loadSeconds: loadS,
    peakRssUnderLoadMb: peak / 1024,
    floorIdleRssMb: floorIdleKb / 1024,
    floorPeakRssUnderLoadMb: floorPeakKb / 1024,
  }
  const yesNo = (ok: boolean): string => (ok ? 'yes' : '**NO**')
  const markdown = [
    '# mcp-edge streams bench',
    '',
    `- ${report.date}, node ${report.node}, fd limit ${fdLimit} (gateway), ${floorFdLimit} (floor proxy)`,
    '',
    '| phase | RSS MB | fds | backend streams | backend sockets |',
    '|---|---:|---:|---:|---:|',
    row('gateway: baseline', gateway.baseline),
    row(`gateway: ${gateway.streams} idle listen streams`, gateway.held),
    row('gateway: after closing them', gateway.afterClose),
    row('floor proxy: baseline', floorRun.baseline),
    row(`floor proxy: ${floorRun.streams} idle listen streams`, floorRun.held),
    row('floor proxy: after closing them', floorRun.afterClose),
    '',
    `RSS per stream above the baseline: **${gateway.perStreamKb.toFixed(1)} KB** (target ≤ 16 KB).`,
    `The floor proxy holding the same ${floorRun.streams} streams: ` +
      `**${floorRun.perStreamKb.toFixed(1)} KB** per stream (gateway − floor: ${aboveFloorKb.toFixed(1)} KB).`,
    `Opened in ${gateway.openSeconds.toFixed(1)} s; back to the baseline: ` +
      `${yesNo(gateway.backToBaseline)} (${gateway.closeSeconds.toFixed(1)} s). The floor proxy: ` +
      `opened in ${floorRun.openSeconds.toFixed(1)} s; back to the baseline: ` +
      `${yesNo(floorRun.backToBaseline)} (${floorRun.closeSeconds.toFixed(1)} s).`,
    `RSS after start-up ${(idleKb / 1024).toFixed(0)} MB; peak under ${loadS} s of c=64 tools/call ` +
      `(before any stream): **${(peak / 1024).toFixed(0)} MB** (target < 120 MB). The floor proxy ` +
      `in the same run: ${(floorIdleKb / 1024).toFixed(0)} MB after start-up, peak ` +
      `${(floorPeakKb / 1024).toFixed(0)} MB under the same load.`,
    '',
  ].join('\n')
  process.stdout.write(markdown)
  await mkdir(join(repoRoot, 'bench', 'results'), { recursive: true })
  await writeFile(join(repoRoot, 'bench', 'results', 'streams.md'), markdown)
  await writeFile(
    join(repoRoot, 'bench', 'results', 'streams.json'),
    `${JSON.stringify(report, null, 2)}\n`,
  )
  // A floor that does not come back points at the harness (the backend's counts, the close path),
  // which puts the gateway's check in doubt too.
  return back ? 0 : 1
}

/**
 * Warm-up, baseline, `count` idle streams held, closed, and the wait back to the baseline: the
 * same steps for the gateway and for the floor. `atSnapshot` runs at the baseline and with the
 * streams open (heap snapshots).
 */
async function holdStreams(
  name: string,
  pid: number,
  url: URL,
  statsUrl: string,
  count: number,
  atSnapshot: () => Promise<void> = async () => undefined,
): Promise<StreamRun> {
  // Warm-up of the stream path itself.
  closeAll(await openStreams(url, 200))
  await settle(6000)
  const baseline = await settledSnapshot(pid, statsUrl)
  await atSnapshot()
  log(`${name} baseline: ${describe(baseline)}`)

  const started = performance.now()
  const open = await openStreams(url, count)
  const openSeconds = (performance.now() - started) / 1000
  const held = await settledSnapshot(pid, statsUrl)
  await atSnapshot()
  const perStreamKb = (held.rssKb - baseline.rssKb) / open.length
  log(`${name}: ${open.length} streams open in ${openSeconds.toFixed(1)} s: ${describe(held)}`)
  log(`${name}: RSS per stream: ${perStreamKb.toFixed(1)} KB`)

  closeAll(open)
  const closeStarted = performance.now()
  const afterClose = await waitBack(pid, statsUrl, baseline)
  const closeSeconds = (performance.now() - closeStarted) / 1000
  log(`${name} closed: ${describe(afterClose)} after ${closeSeconds.toFixed(1)} s`)
  const backToBaseline =
    afterClose.fds <= baseline.fds &&
    afterClose.backendStreams <= baseline.backendStreams &&
    afterClose.backendSockets <= baseline.backendSockets
  return {
    baseline,
    held,
    afterClose,
    streams: open.length,
    perStreamKb,
    openSeconds,
    closeSeconds,
    backToBaseline,
  }
}

function row(name: string, s: Snapshot): string {
  return `| ${name} | ${(s.rssKb / 1024).toFixed(1)} | ${s.fds} | ${s.backendStreams} | ${s.backendSockets} |`
}

function describe(s: Snapshot): string {
  return (
    `RSS ${(s.rssKb / 1024).toFixed(1)} MB, ${s.fds} fds, ` +
    `backend ${s.backendStreams} streams / ${s.backendSockets} sockets`
  )
}

/** The soft "Max open files" of a process (/proc/<pid>/limits). */
function softFdLimit(pid: number): number {
  const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'))
  const soft = Number(line?.split(/\s{2,}/)[1])
  if (!Number.isFinite(soft)) throw new Error(`cannot read the fd limit of ${pid}`)
  return soft
}

function rssKb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const match = /VmRSS:\s+(\d+) kB/.exec(status)
  return Number(match?.[1] ?? NaN)
}

async function snapshot(pid: number, statsUrl: string): Promise<Snapshot> {
  const res = await fetch(statsUrl)
  const stats = (await res.json()) as { streams: number; sockets: number }
  return {
    rssKb: rssKb(pid),
    fds: readdirSync(`/proc/${pid}/fd`).length,
    backendStreams: stats.streams,
    backendSockets: stats.sockets,
  }
}

/**
 * The process at rest: the sample with the least RSS over SETTLE_SAMPLES seconds. Right after a
 * burst of work (opening thousands of streams, the warm-up) RSS may still hold garbage V8 collects
 * when it gets to it; the lowest sample leaves that out. Baseline and held streams are read the
 * same way, for the gateway and the floor alike.
 */
async function settledSnapshot(pid: number, statsUrl: string): Promise<Snapshot> {
  let best = await snapshot(pid, statsUrl)
  for (let i = 1; i < SETTLE_SAMPLES; i++) {
    await settle(1000)
    const now = await snapshot(pid, statsUrl)
    if (now.rssKb < best.rssKb) best = now
  }
  return best
}

/** Polls until fds and the backend's streams and sockets are back to `base` (30 s at most). */
async function waitBack(pid: number, statsUrl: string, base: Snapshot): Promise<Snapshot> {
  const deadline = Date.now() + 30_000
  for (;;) {
    const now = await snapshot(pid, statsUrl)
    const back =
      now.fds <= base.fds &&
      now.backendStreams <= base.backendStreams &&
      now.backendSockets <= base.backendSockets
    if (back || Date.now() > deadline) return now
    await settle(250)
  }
}

function listenBody(id: string): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'subscriptions/listen',
    params: {
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'bench-streams', version: '1' },
      },
      notifications: { toolsListChanged: true },
    },
  })
}

/** Opens one listen stream on a raw socket; resolves once the acknowledgement event arrived. */
function openStream(url: URL, n: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const body = listenBody(`listen:${n}`)
    const socket = connect(Number(url.port), url.hostname)
    let seen = ''
    const timer = setTimeout(
      () => fail(new Error(`stream ${n}: no acknowledgement in 10 s`)),
      10_000,
    )
    const fail = (err: Error): void => {
      clearTimeout(timer)
      socket.destroy()
      reject(err)
    }
    socket.on('error', fail)
    socket.on('data', (chunk: Buffer) => {
      seen += chunk.toString('latin1')
      if (!seen.startsWith('HTTP/1.1 200'))
        return fail(new Error(`stream ${n}: ${seen.slice(0, 300)}`))
      if (seen.includes('notifications/subscriptions/acknowledged')) {
        clearTimeout(timer)
        seen = ''
        socket.removeAllListeners('data')
        socket.on('error', () => undefined)
        resolve(socket)
      }
    })
    socket.write(
      `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\n` +
        'Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n' +
        'MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    )
  })
}

async function openStreams(url: URL, count: number): Promise<Socket[]> {
  const sockets: Socket[] = []
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < count) sockets.push(await openStream(url, next++))
  }
  await Promise.all(Array.from({ length: Math.min(OPEN_AT_ONCE, count) }, worker))
  return sockets
}

function closeAll(sockets: readonly Socket[]): void {
  for (const s of sockets) s.destroy()
}

function settle(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

async function heapSnapshot(pid: number): Promise<void> {
  const snapshots = (): string[] => readdirSync(repoRoot).filter((f) => f.endsWith('.heapsnapshot'))
  const before = snapshots().length
  process.kill(pid, 'SIGUSR2')
  // Writing a snapshot blocks the gateway: wait for the file to appear and stop growing.
  let size = -1
  for (let i = 0; i < 600; i++) {
    await settle(1000)
    const names = snapshots()
    if (names.length <= before) continue
    const now = statSync(join(repoRoot, names.sort().at(-1) ?? '')).size
    if (now === size) return
    size = now
  }
}

/** c=16 tools/call for `seconds`, ignoring results (warm-up). */
function load(url: URL, connections: number, seconds: number): Promise<void> {
  const { headers, body } = buildRequest('tools/call')
  const options = { url: url.href, method: 'POST' as const, headers, body, connections }
  return new Promise((resolve, reject) => {
    autocannon({ ...options, duration: seconds }, (err) => (err ? reject(err) : resolve()))
  })
}

/**
 * Starts the floor proxy for this run. Run as plain JavaScript (floor.ts with its types stripped),
 * not under tsx, whose loader thread would add its own megabytes; with the gateway's shipped node
 * flags and pinned where the gateway runs, so that its RSS compares with the gateway's. Its fd
 * limit is this process's, as the gateway's is.
 */
async function startFloor(
  backendUrl: string,
  streams: number,
): Promise<{ child: Child; url: URL }> {
  const source = await readFile(join(repoRoot, 'bench', 'floor.ts'), 'utf8')
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  })
  // Inside the repository, so that `undici` resolves from its node_modules.
  const dir = join(repoRoot, 'node_modules', '.cache', 'mcp-edge-bench')
  await mkdir(dir, { recursive: true })
  const script = join(dir, 'floor.mjs')
  await writeFile(script, outputText)
  const upstream = new URL(backendUrl).origin
  // Each held stream keeps its upstream connection, so the pool must allow one per stream (or the
  // streams past its cap would queue forever); never fewer than floor.ts's default, so the load
  // phase runs with the same pool as in `npm run bench`. A cap rather than none (`null`): a
  // warm-up stream whose connection the floor kept would count in its baseline unnoticed, but
  // with the cap it leaves the last measured stream without a connection, which then fails.
  const connections = Math.max(streams, FLOOR_LOAD_CONNECTIONS)
  const args = [
    ...shippedNodeFlags(repoRoot),
    ...[script, '--upstream', upstream, '--port', '0', '--connections', String(connections)],
  ]
  const child = spawnNode('floor', [...args, '--lifeline'], { cpu: GATEWAY_CPU, cwd: repoRoot })
  const match = await waitForLine(child, /listening (\d+)/, 20_000)
  return { child, url: new URL(`http://127.0.0.1:${match[1] ?? ''}/mcp`) }
}

/** Peak RSS (KB) of a process under c=64 tools/call. */
async function rssUnderLoad(pid: number, url: URL, seconds: number): Promise<number> {
  let peak = 0
  const timer = setInterval(() => (peak = Math.max(peak, rssKb(pid))), 250)
  await load(url, 64, seconds)
  clearInterval(timer)
  return Math.max(peak, rssKb(pid))
}

function log(line: string): void {
  process.stderr.write(`bench:streams: ${line}\n`)
}

runScript('bench:streams', main)
