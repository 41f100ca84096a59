/**
 * `npm run bench:streams`: memory under many idle `subscriptions/listen` streams, and under load.
 *
 * 1. RSS of the fresh gateway (default config, `trustHeaders: false`, access log and cache on),
 *    and its peak under sustained tools/call load (c=64) for BENCH_LOAD_S seconds (default 10);
 *    the same for the floor proxy (floor.ts) under the same load, in the same run, for scale: what
 *    a bare Node pass-through holds there (V8's young generation grows to its cap under load).
 * 2. Baseline after that and a few streams opened and closed: RSS, open fds, backend sockets.
 * 3. Opens as many idle listen streams through the gateway as its fd limit allows (each holds two
 *    sockets there: the client's and the upstream one), or BENCH_STREAMS if lower, and reports the
 *    RSS each one adds above the baseline.
 * 4. Closes them all and waits for the gateway's fds, the backend's open streams and its sockets
 *    to come back to the baseline: a stream that leaks a socket, a listener or a slot shows here.
 *
 * The fd limit is the gateway's soft RLIMIT_NOFILE, which it inherits: the npm script raises the
 * soft limit to the hard one first. BENCH_HEAP_SNAPSHOTS=1 starts the gateway with
 * `--heapsnapshot-signal=SIGUSR2` and takes a snapshot at the baseline and with the streams open
 * (written into the gateway's working directory, the repository root).
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import ts from 'typescript'
import { runScript, spawnNode, waitForLine } from './children.js'
import { launchGateway, shippedNodeFlags } from './gateway.js'
import { buildRequest } from './requests.js'
import { startBackend } from './targets.js'

const GATEWAY_CPU = 0
const BACKEND_CPU = 1
/** fds the gateway needs besides the streams: listeners, pools, log, config watcher, margin. */
const FD_RESERVE = 300
const OPEN_AT_ONCE = 200
const repoRoot = fileURLToPath(new URL('..', import.meta.url))

interface Snapshot {
  readonly rssKb: number
  readonly fds: number
  readonly backendStreams: number
  readonly backendSockets: number
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
  const loadS = Number(process.env['BENCH_LOAD_S'] ?? 10)
  const floor = await floorUnderLoad(backend.url, loadS)
  log(
    `floor proxy: RSS idle ${(floor.idleKb / 1024).toFixed(0)} MB; under the same load: ` +
      `peak ${(floor.peakKb / 1024).toFixed(0)} MB`,
  )
  const idleKb = rssKb(pid)
  const peak = await rssUnderLoad(pid, url, loadS)
  log(
    `RSS idle ${(idleKb / 1024).toFixed(0)} MB; under c=64 tools/call for ${loadS} s: ` +
      `peak ${(peak / 1024).toFixed(0)} MB`,
  )
  // Warm-up of the stream path itself.
  closeAll(await openStreams(url, 200))
  await settle(6000)
  const base = await snapshot(pid, backend.statsUrl)
  if (snapshots) await heapSnapshot(pid)
  log(`baseline: ${describe(base)}`)

  const started = performance.now()
  const open = await openStreams(url, count)
  const openS = (performance.now() - started) / 1000
  await settle(3000)
  const held = await snapshot(pid, backend.statsUrl)
  if (snapshots) await heapSnapshot(pid)
  const perStreamKb = (held.rssKb - base.rssKb) / open.length
  log(`${open.length} streams open in ${openS.toFixed(1)} s: ${describe(held)}`)
  log(`RSS per stream: ${perStreamKb.toFixed(1)} KB`)

  closeAll(open)
  const closeStarted = performance.now()
  const after = await waitBack(pid, backend.statsUrl, base)
  const closeS = (performance.now() - closeStarted) / 1000
  log(`closed: ${describe(after)} after ${closeS.toFixed(1)} s`)
  const back =
    after.fds <= base.fds &&
    after.backendStreams <= base.backendStreams &&
    after.backendSockets <= base.backendSockets

  const report = {
    date: new Date().toISOString(),
    node: process.version,
    fdLimit,
    streams: open.length,
    openSeconds: openS,
    baseline: base,
    held,
    perStreamKb,
    afterClose: after,
    closeSeconds: closeS,
    backToBaseline: back,
    idleRssMb: idleKb / 1024,
    loadSeconds: loadS,
    peakRssUnderLoadMb: peak / 1024,
    floorIdleRssMb: floor.idleKb / 1024,
    floorPeakRssUnderLoadMb: floor.peakKb / 1024,
  }
  const markdown = [
    '# mcp-edge streams bench',
    '',
    `- ${report.date}, node ${report.node}, gateway fd limit ${fdLimit}`,
    '',
    '| phase | gateway RSS MB | gateway fds | backend streams | backend sockets |',
    '|---|---:|---:|---:|---:|',
    row('baseline', base),
    row(`${open.length} idle listen streams`, held),
    row('after closing them', after),
    '',
    `RSS per stream above the baseline: **${perStreamKb.toFixed(1)} KB** (target ≤ 16 KB).`,
    `Opened in ${openS.toFixed(1)} s; back to the baseline: ${back ? 'yes' : '**NO**'} (${closeS.toFixed(1)} s).`,
    `RSS after start-up ${(idleKb / 1024).toFixed(0)} MB; peak under ${loadS} s of c=64 tools/call ` +
      `(before any stream): **${(peak / 1024).toFixed(0)} MB** (target < 120 MB). The floor proxy ` +
      `in the same run: ${(floor.idleKb / 1024).toFixed(0)} MB after start-up, peak ` +
      `${(floor.peakKb / 1024).toFixed(0)} MB under the same load.`,
    '',
  ].join('\n')
  process.stdout.write(markdown)
  await mkdir(join(repoRoot, 'bench', 'results'), { recursive: true })
  await writeFile(join(repoRoot, 'bench', 'results', 'streams.md'), markdown)
  await writeFile(
    join(repoRoot, 'bench', 'results', 'streams.json'),
    `${JSON.stringify(report, null, 2)}\n`,
  )
  return back ? 0 : 1
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
 * The floor proxy's RSS after start-up and its peak under the same load, to scale the gateway's.
 * Run as plain JavaScript (floor.ts with its types stripped), not under tsx, whose loader thread
 * would add its own megabytes; with the gateway's shipped node flags, pinned where the gateway
 * runs, and stopped before the gateway's turn.
 */
async function floorUnderLoad(
  backendUrl: string,
  seconds: number,
): Promise<{ idleKb: number; peakKb: number }> {
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
  const args = [...shippedNodeFlags(repoRoot), script, '--upstream', upstream, '--port', '0']
  const child = spawnNode('floor', [...args, '--lifeline'], {
    cpu: GATEWAY_CPU,
    cwd: repoRoot,
  })
  try {
    const match = await waitForLine(child, /listening (\d+)/, 20_000)
    await settle(1000)
    const idleKb = rssKb(child.pid)
    const peakKb = await rssUnderLoad(
      child.pid,
      new URL(`http://127.0.0.1:${match[1] ?? ''}/mcp`),
      seconds,
    )
    return { idleKb, peakKb }
  } finally {
    child.proc.kill()
    await child.exited
  }
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
