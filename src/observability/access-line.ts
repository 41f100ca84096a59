import { pino, type Logger } from 'pino'

/** The fields of one access-log line. */
interface AccessFields {
  readonly server: string | undefined
  readonly method: string | undefined
  readonly name: string | undefined
  readonly era: string | undefined
  readonly status: number
  readonly upstream: string | undefined
  readonly outcome: string
  readonly ms: number
}

/** Longest client-supplied value written to the log (a header may hold 16 KiB). */
const MAX_VALUE = 512
/**
 * The process log's largest single write (log.ts). Each write is a trip through libuv's thread
 * pool whose cost hardly depends on its size: 8 KiB batches cost ~0.4 µs more per line than 16 KiB
 * ones in process, and a gateway profile put the 16 KiB writes at ~2% of its CPU.
 */
export const ACCESS_BATCH_BYTES = 64 * 1024
/** Lines are handed to the destination in batches of about this many characters… */
const BATCH_CHARS = 60_000
/** …and at least this often, so a quiet gateway still logs promptly. */
const BATCH_MS = 250

/** Writes access lines; `flush` hands over anything batched (on shutdown). */
export interface AccessWriter {
  readonly write: ((f: AccessFields) => void) | undefined
  flush(): void
  close(): void
}

/**
 * Writes access-log lines in pino's own format (level 30, ISO time, `svc`, `msg: "request"`) to the
 * logger's destination, serialising the eight known fields by hand: going through pino's generic
 * object serialiser cost ~10 µs per request on the proxy path (bench), a fifth of the gateway's
 * budget. Other log lines still go through pino.
 */
export function createAccessWriter(log: Logger, opts: { batch: boolean }): AccessWriter {
  const none = { write: undefined, flush: () => undefined, close: () => undefined }
  if (!log.isLevelEnabled('info')) return none
  // pino.symbols is exported for integrations (pino docs/api.md "pino.symbols"), but streamSym is
  // not a promised interface: package.json pins pino's major, and should a release drop the
  // symbol, lines go through log.info (slower, same content).
  const stream = (log as unknown as Record<symbol, { write(line: string): unknown }>)[
    pino.symbols.streamSym
  ]
  if (stream === undefined) return { ...none, write: (f) => log.info({ ...f }, 'request') }
  // Batching matters: pino's destination (sonic-boom) measures its whole pending buffer on every
  // write(), which cost ~4% of the proxy's CPU at one write per request.
  let batch = ''
  const flush = (): void => {
    if (batch.length === 0) return
    const out = batch
    batch = ''
    stream.write(out)
  }
  const timer = opts.batch ? setInterval(flush, BATCH_MS) : undefined
  timer?.unref()
  const emit = opts.batch
    ? (line: string): void => {
        batch += line
        if (batch.length >= BATCH_CHARS) flush()
      }
    : (line: string): void => void stream.write(line)
  let lastMs = 0
  let lastIso = ''
  const write = (f: AccessFields): void => {
    const now = Date.now()
    if (now !== lastMs) {
      lastMs = now
      lastIso = new Date(now).toISOString()
    }
    let line = `{"level":30,"time":"${lastIso}","svc":"mcp-edge"`
    if (f.server !== undefined) line += `,"server":${str(f.server)}`
    if (f.method !== undefined) line += `,"method":${str(f.method)}`
    if (f.name !== undefined) line += `,"name":${str(f.name)}`
    if (f.era !== undefined) line += `,"era":"${f.era}"`
    line += `,"status":${f.status}`
    if (f.upstream !== undefined) line += `,"upstream":${str(f.upstream)}`
    line += `,"outcome":${str(f.outcome)},"ms":${f.ms},"msg":"request"}\n`
    emit(line)
  }
  return {
    write,
    flush,
    close() {
      clearInterval(timer)
      flush()
    },
  }
}

/** Quoted values seen lately: servers, methods, outcomes and tool names repeat on every line. */
const quoted = new Map<string, string>()
/** Bounded: names come from clients; past this many the map starts over… */
const MAX_QUOTED = 1024
/** …and only short values are kept (at most 1024 × 256 characters). */
const MAX_QUOTED_LENGTH = 256

/** JSON string, capped: values come from clients. */
function str(s: string): string {
  if (s.length > MAX_QUOTED_LENGTH)
    return JSON.stringify(s.length > MAX_VALUE ? `${s.slice(0, MAX_VALUE)}…` : s)
  let q = quoted.get(s)
  if (q !== undefined) return q
  q = JSON.stringify(s)
  if (quoted.size >= MAX_QUOTED) quoted.clear()
  quoted.set(s, q)
  return q
}
