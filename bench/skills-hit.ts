/**
 * `npm run bench:skills`: what a cached `skills/list` hit costs the gateway next to a cached
 * `tools/list` hit of the same size (docs/skills.md §Cost). One built gateway (`dist/cli.js`,
 * cache on, access log at info, pinned to CPU 0) in front of one backend that answers both lists
 * cacheable (`ttlMs`, `cacheScope: "public"`), the skills answer padded to the tools answer's
 * exact byte length (60 entries each, about 20 KB). Both lists are primed and checked to be hits
 * (the backend sees no further request) before any load; then the two cells alternate,
 * `BENCH_SKILLS_ROUNDS` rounds of `BENCH_SKILLS_DURATION_S` at 16 connections, and each side's
 * cost is its least gateway CPU per request (utime+stime from /proc) over the rounds, as in
 * `npm run bench:gate`: on a shared machine interference only ever adds CPU time. Exits 1 when
 * the skills hit costs more than the tools hit by over `BENCH_SKILLS_TOLERANCE` (default 0.1).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Pool } from 'undici'
import { runScript } from './children.js'
import { LIST_RESULT_TAIL, withId } from './fixtures.js'
import { launchGateway } from './gateway.js'
import { clockTicksPerSecond, cpuTicks, hasProcStat, processTree } from './proc.js'

const GATEWAY_CPU = 0
const CONNECTIONS = 16
const PROTOCOL_VERSION = '2026-07-28'
const repoRoot = fileURLToPath(new URL('..', import.meta.url))

const env = (name: string, fallback: number): number => {
  const raw = process.env[name]
  const value = raw === undefined || raw === '' ? fallback : Number(raw)
  if (!(value > 0)) throw new Error(`${name} must be a positive number, got ${raw}`)
  return value
}

type ListMethod = 'tools/list' | 'skills/list'

/**
 * The skills/list answer (everything after `"id":`), as long as the tools/list one: 60 skills
 * (a SKILL.md each), the first description padded to make up the difference.
 */
function skillsTail(length: number): string {
  const entry = (i: number, pad: string) => {
    const name = `skill-${String(i).padStart(2, '0')}`
    const base = `skill://bench/${name}`
    const file = (path: string, n: number) => ({
      uri: `${base}/${path}`,
      digest: `sha256:${(i * 16 + n).toString(16).padStart(64, '0')}`,
      size: 1000 + n,
    })
    return {
      uri: `${base}/SKILL.md`,
      frontmatter: { name, description: `Synthetic skill ${i} for the bench.${pad}` },
      resources: [file('SKILL.md', 0)],
    }
  }
  const tail = (pad: string) =>
    `,"result":${JSON.stringify({
      skills: Array.from({ length: 60 }, (_, i) => entry(i, i === 0 ? pad : '')),
      resultType: 'complete',
      ttlMs: 60_000,
      cacheScope: 'public',
    })}}`
  const short = length - tail('').length
  if (short < 0) throw new Error(`the skills answer is ${-short} bytes longer than the tools one`)
  return tail(' '.repeat(short))
}

const TAILS: Readonly<Record<ListMethod, string>> = {
  'tools/list': LIST_RESULT_TAIL,
  'skills/list': skillsTail(LIST_RESULT_TAIL.length),
}

const DISCOVER_TAIL = `,"result":${JSON.stringify({
  supportedVersions: [PROTOCOL_VERSION],
  capabilities: { tools: {}, resources: {}, extensions: { 'io.modelcontextprotocol/skills': {} } },
  serverInfo: { name: 'bench-skills', version: '1' },
  resultType: 'complete',
})}}`

/** The backend, in this process: it is reached only by the priming requests. */
async function startBackend(): Promise<{ url: string; requests: () => number; close(): void }> {
  let requests = 0
  const answer = (res: ServerResponse, body: string) => {
    const msg = JSON.parse(body) as { id?: unknown; method?: string }
    if (msg.id === undefined) return void res.writeHead(202).end()
    const tail =
      msg.method === 'server/discover'
        ? DISCOVER_TAIL
        : (TAILS[msg.method as ListMethod] ??
          `,"error":{"code":-32601,"message":"Method not found"}}`)
    const text = withId(msg.id, tail)
    res
      .writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(text),
      })
      .end(text)
  }
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    requests++
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => answer(res, Buffer.concat(chunks).toString('utf8')))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests: () => requests,
    close: () => server.close(),
  }
}

/** The load's request for a list (id 1), as bench/requests.ts builds tools/list. */
function request(method: ListMethod, id: number | string = 1) {
  return {
    method: 'POST' as const,
    path: '/mcp/bench',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': method,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method,
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
          'io.modelcontextprotocol/clientCapabilities': {},
          'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1' },
        },
      },
    }),
  }
}

/** One answer, which must be a 200 JSON-RPC result with the id echoed. */
async function once(pool: Pool, method: ListMethod, id: number | string): Promise<Buffer> {
  const res = await pool.request(request(method, id))
  const body = Buffer.from(await res.body.arrayBuffer())
  const msg = JSON.parse(body.toString('utf8')) as { id?: unknown; result?: unknown }
  if (res.statusCode !== 200 || msg.id !== id || typeof msg.result !== 'object')
    throw new Error(`${method} → ${res.statusCode}: ${body.toString('utf8').slice(0, 300)}`)
  return body
}

/** `seconds` of load at CONNECTIONS in flight; the gateway's CPU per answer (µs) in the window. */
async function cell(
  pool: Pool,
  method: ListMethod,
  pids: readonly number[],
  seconds: number,
): Promise<number> {
  const req = request(method)
  let answers = 0
  let failures = 0
  const until = Date.now() + seconds * 1000
  const ticks0 = cpuTicks(pids)
  const loop = async () => {
    while (Date.now() < until) {
      const res = await pool.request(req)
      await res.body.dump()
      if (res.statusCode === 200) answers++
      else failures++
    }
  }
  await Promise.all(Array.from({ length: CONNECTIONS }, loop))
  const ticks = cpuTicks(pids) - ticks0
  if (failures > 0) throw new Error(`${method}: ${failures} answers were not 200`)
  return ((ticks / clockTicksPerSecond()) * 1e6) / answers
}

async function main(): Promise<number> {
  if (!hasProcStat()) throw new Error('this bench needs Linux /proc/<pid>/stat for CPU accounting')
  const rounds = env('BENCH_SKILLS_ROUNDS', 6)
  const durationS = env('BENCH_SKILLS_DURATION_S', 2)
  const tolerance = env('BENCH_SKILLS_TOLERANCE', 0.1)
  const configDir = mkdtempSync(join(tmpdir(), 'mcp-edge-skills-bench-'))
  process.once('exit', () => rmSync(configDir, { recursive: true, force: true }))
  const backend = await startBackend()
  const gw = await launchGateway(
    { name: 'skills-hit', repoRoot, configDir, cpu: GATEWAY_CPU },
    (port) => ({
      listen: { host: '127.0.0.1', port },
      servers: { bench: { upstreams: [{ url: backend.url }] } },
      log: { level: process.env['BENCH_LOG_LEVEL'] ?? 'info' },
      cache: {},
    }),
  )
  const pids = processTree(gw.child.pid)
  const pool = new Pool(gw.baseUrl, { connections: CONNECTIONS, pipelining: 1 })
  try {
    // Both lists cached, the same size on the wire, and hits: the backend hears no more of them.
    const sizes: number[] = []
    for (const method of ['tools/list', 'skills/list'] as const) {
      await once(pool, method, 1)
      const before = backend.requests()
      for (const id of [1, `check-${method}`, 1]) sizes.push((await once(pool, method, id)).length)
      if (backend.requests() !== before) throw new Error(`${method} is not answered from the cache`)
    }
    const [tools, , , skills] = sizes
    if (tools !== skills)
      throw new Error(`the answers differ in size: ${tools} and ${skills} bytes`)
    // Unmeasured: the gateway JITs both hit paths before the first measured cell.
    for (const m of ['tools/list', 'skills/list'] as const) await cell(pool, m, pids, 1)
    const cpu: Record<ListMethod, number[]> = { 'tools/list': [], 'skills/list': [] }
    for (let r = 0; r < rounds; r++) {
      const order: ListMethod[] =
        r % 2 === 0 ? ['tools/list', 'skills/list'] : ['skills/list', 'tools/list']
      for (const m of order) cpu[m].push(await cell(pool, m, pids, durationS))
      process.stderr.write(
        `round ${r + 1}: tools ${cpu['tools/list'].at(-1)?.toFixed(1)} µs, skills ${cpu['skills/list'].at(-1)?.toFixed(1)} µs\n`,
      )
    }
    const least = (m: ListMethod) => Math.min(...cpu[m])
    const ratio = least('skills/list') / least('tools/list')
    const ok = ratio <= 1 + tolerance
    process.stdout.write(
      [
        `| cached hit, ${tools} bytes, c=${CONNECTIONS} | gateway CPU per request | ÷ tools/list |`,
        '|---|---:|---:|',
        `| tools/list | ${least('tools/list').toFixed(1)} µs | 1.00 |`,
        `| skills/list | ${least('skills/list').toFixed(1)} µs | ${ratio.toFixed(2)} ${ok ? 'ok' : 'OVER'} |`,
        '',
      ].join('\n'),
    )
    return ok ? 0 : 1
  } finally {
    await pool.close()
    backend.close()
  }
}

runScript('bench:skills', main)
