import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { onTestFinished, vi } from 'vitest'

/** One JSON-RPC request as a mock replica received it. */
export interface ReceivedCall {
  readonly replica: string
  readonly method: string
  /** Raw JSON text of the id, e.g. `7` or `"a"`. */
  readonly id: string
  /** params.name or params.uri, when present. */
  readonly name: string | undefined
  readonly headers: IncomingMessage['headers']
}

/** How a mock replica answers one request. */
export type Fault =
  /** A JSON answer naming the replica. */
  | 'ok'
  /** TCP reset after the whole request was read (the backend "ran" it). */
  | 'reset'
  /** Never answers. */
  | 'hang'
  | { readonly delayMs: number }
  | {
      readonly status: number
      readonly body?: string
      readonly contentType?: string
      readonly headers?: Readonly<Record<string, string>>
    }
  /** 200 text/event-stream writing these raw chunks `intervalMs` apart, left open unless `end`
   * (or reset after the last chunk with `reset`). */
  | {
      readonly sse: readonly string[]
      readonly intervalMs?: number
      readonly end?: boolean
      readonly reset?: boolean
    }

/** Picks the fault for a request (health checks are `server/discover`). */
export type FaultHook = (call: ReceivedCall) => Fault

/** A plain node:http replica (not hono, not the SDK) with scriptable faults. */
export interface MockReplica {
  readonly name: string
  readonly url: string
  readonly port: number
  /** Every JSON-RPC request received, oldest first. */
  readonly calls: ReceivedCall[]
  /** Requests being answered right now. */
  readonly inFlight: number
  /** Calls of `method` (health checks excluded unless asked for). */
  count(method?: string): number
  setFault(hook: FaultHook): void
  /** Stops listening and destroys every socket at once (a crash): in-flight requests see a reset. */
  kill(): Promise<void>
  /** Listens again on the same port. */
  restart(): Promise<void>
  close(): Promise<void>
}

/**
 * Starts a mock replica on a loopback address of its own (port 0) and closes it when the test ends.
 *
 * A killed replica must refuse until it restarts on the same port. On 127.0.0.1, the port it
 * frees can be given to a server of a test file running beside it, which then answers in its
 * place; no other server binds a random 127.x.y.z.
 */
export async function startReplica(
  name: string,
  hook: FaultHook = () => 'ok',
): Promise<MockReplica> {
  let fault = hook
  let inFlight = 0
  const calls: ReceivedCall[] = []
  const handle = (req: IncomingMessage, res: ServerResponse, body: Buffer): void => {
    let msg: Record<string, unknown>
    try {
      msg = JSON.parse(body.toString('utf8')) as Record<string, unknown>
    } catch {
      return void res.writeHead(400, { 'content-type': 'application/json' }).end('{}')
    }
    const params = (msg['params'] ?? {}) as Record<string, unknown>
    const target = params['name'] ?? params['uri']
    const call: ReceivedCall = {
      replica: name,
      method: String(msg['method']),
      id: JSON.stringify(msg['id'] ?? null),
      name: typeof target === 'string' ? target : undefined,
      headers: req.headers,
    }
    calls.push(call)
    const f = fault(call)
    if (f === 'hang') return
    if (f === 'reset') return void req.socket.resetAndDestroy()
    inFlight++
    res.once('close', () => inFlight--)
    if (f === 'ok') return answer(res, call)
    if ('delayMs' in f) {
      const timer = setTimeout(() => answer(res, call), f.delayMs)
      res.once('close', () => clearTimeout(timer))
      return
    }
    if ('sse' in f)
      return writeSse(res, f.sse, f.intervalMs ?? 0, f.reset === true ? 'reset' : f.end === true)
    res
      .writeHead(f.status, { 'content-type': f.contentType ?? 'text/html', ...f.headers })
      .end(f.body ?? '')
  }
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => handle(req, res, Buffer.concat(chunks)))
  })
  server.keepAliveTimeout = 5000
  const host = loopbackHost()
  await listen(server, host, 0)
  const port = (server.address() as AddressInfo).port
  const replica: MockReplica = {
    name,
    url: `http://${host}:${port}/mcp`,
    port,
    calls,
    get inFlight() {
      return inFlight
    },
    count: (method) =>
      calls.filter((c) =>
        method === undefined ? c.method !== 'server/discover' : c.method === method,
      ).length,
    setFault: (h) => void (fault = h),
    kill: () => stop(server),
    restart: () => listen(server, host, port),
    close: () => stop(server),
  }
  onTestFinished(() => replica.close())
  return replica
}

/** Starts `n` replicas named r0, r1, … */
export function startReplicas(n: number, hook?: FaultHook): Promise<MockReplica[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => startReplica(`r${i}`, hook)))
}

function answer(res: ServerResponse, call: ReceivedCall): void {
  if (res.destroyed) return
  const result =
    call.method === 'server/discover'
      ? {
          supportedVersions: ['2026-07-28'],
          capabilities: {},
          resultType: 'complete',
          ttlMs: 0,
          cacheScope: 'private',
        }
      : {
          content: [{ type: 'text', text: call.replica }],
          replica: call.replica,
          tools: [],
          resultType: 'complete',
        }
  const body = `{"jsonrpc":"2.0","id":${call.id},"result":${JSON.stringify(result)}}`
  res
    .writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    })
    .end(body)
}

function writeSse(
  res: ServerResponse,
  chunks: readonly string[],
  intervalMs: number,
  end: boolean | 'reset',
): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  res.flushHeaders()
  let timer: NodeJS.Timeout | undefined
  res.once('close', () => clearTimeout(timer))
  const next = (i: number): void => {
    if (res.destroyed) return
    const chunk = chunks[i]
    if (chunk === undefined) {
      if (end === 'reset') res.socket?.resetAndDestroy()
      else if (end) res.end()
      return
    }
    res.write(chunk)
    timer = setTimeout(() => next(i + 1), intervalMs)
  }
  next(0)
}

/** 127.a.b.c, never 127.0.0.1: Linux answers the whole of 127.0.0.0/8 on the loopback device. */
function loopbackHost(): string {
  const byte = (): number => 1 + Math.floor(Math.random() * 254)
  return `127.${byte()}.${byte()}.${byte()}`
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
}

function stop(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve()
  return new Promise((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections()
  })
}

/** Runs `total` calls of `task` with at most `concurrency` at once; resolves with every result. */
export async function runLoad<T>(
  total: number,
  concurrency: number,
  task: (i: number) => Promise<T>,
): Promise<T[]> {
  const results: T[] = new Array<T>(total)
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < total) {
      const i = next++
      results[i] = await task(i)
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker))
  return results
}

/** Polls `check` every 20 ms until it returns a value other than undefined/false (or throws after `ms`). */
export function waitUntil<T>(
  check: () => T | undefined | false,
  ms = 5000,
  what = 'condition',
): Promise<T> {
  return vi.waitFor(
    () => {
      const v = check()
      if (v === undefined || v === false) throw new Error(`timed out waiting for ${what}`)
      return v
    },
    { timeout: ms, interval: 20 },
  )
}

/** Gateway config with one server `app` in front of `replicas` (weights optional). */
export function poolConfig(
  replicas: readonly { readonly url: string }[],
  server: Record<string, unknown> = {},
  weights: readonly number[] = [],
): Record<string, unknown> {
  const upstreams = replicas.map((r, i) => ({
    url: r.url,
    ...(weights[i] !== undefined && { weight: weights[i] }),
  }))
  return { servers: { app: { upstreams, ...server } } }
}
