import { pino, type Logger } from 'pino'

/**
 * Log lines serialised by hand (access and audit lines, one or more per request) in pino's own
 * format, handed to the process log's destination in batches. pino's generic object serialiser
 * cost ~10 µs per line on the proxy path (bench); other log lines still go through pino.
 */
export interface LineSink {
  /** Appends one complete line, ending in `\n`. */
  emit(line: string): void
  /** The line's start as pino writes it: level 30, ISO time, the process's `svc` binding. */
  head(): string
  /** Hands over anything batched. */
  flush(): void
  /** Stops the batch timer and flushes (shutdown). */
  close(): void
}

/**
 * The process log's largest single write (log.ts). Each write is a trip through libuv's thread
 * pool whose cost hardly depends on its size: 8 KiB batches cost ~0.4 µs more per line than 16 KiB
 * ones in process, and a gateway profile put the 16 KiB writes at ~2% of its CPU.
 */
export const LOG_BATCH_BYTES = 64 * 1024
/** Lines are handed to the destination in batches of about this many characters… */
const BATCH_CHARS = 60_000
/** …and at least this often, so a quiet gateway still logs promptly. */
const BATCH_MS = 250

/**
 * The logger's destination as a sink, or undefined when pino does not expose it (then callers log
 * through pino: slower, same content). pino.symbols is exported for integrations (pino
 * docs/api.md "pino.symbols"), but streamSym is not a promised interface: package.json pins
 * pino's major. `batch: false` (a test's destination) writes each line on its own.
 */
export function createLineSink(log: Logger, opts: { batch: boolean }): LineSink | undefined {
  const stream = (log as unknown as Record<symbol, { write(line: string): unknown } | undefined>)[
    pino.symbols.streamSym
  ]
  if (stream === undefined) return undefined
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
  let lastMs = 0
  let lastHead = ''
  /** The ISO time of the current second, up to its `.`: only the milliseconds change within it. */
  let second = -1
  let secondText = ''
  return {
    emit: opts.batch
      ? (line) => {
          batch += line
          if (batch.length >= BATCH_CHARS) flush()
        }
      : (line) => void stream.write(line),
    head() {
      const now = Date.now()
      if (now !== lastMs) {
        lastMs = now
        // toISOString per millisecond cost more than the rest of the line; within one second
        // only the three digits of the milliseconds differ.
        const s = Math.floor(now / 1000)
        if (s !== second) {
          second = s
          secondText = new Date(s * 1000).toISOString().slice(0, 20)
        }
        const ms = now - s * 1000
        const pad = ms < 10 ? '00' : ms < 100 ? '0' : ''
        lastHead = `{"level":30,"time":"${secondText}${pad}${ms}Z","svc":"mcp-edge"`
      }
      return lastHead
    },
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

/** `s` as a JSON string. */
export function quote(s: string): string {
  if (s.length > MAX_QUOTED_LENGTH) return JSON.stringify(s)
  let q = quoted.get(s)
  if (q !== undefined) return q
  q = JSON.stringify(s)
  if (quoted.size >= MAX_QUOTED) quoted.clear()
  quoted.set(s, q)
  return q
}

/**
 * A request id as a JSON string. Ids (the gateway's own, `randomUUID`) are never seen twice, so
 * they skip `quote`'s memo, which they would otherwise fill and clear every 1,024 requests (taking
 * the repeated names with them). JSON.stringify of a 36-character id takes less than testing
 * whether it is a UUID that needs no escaping (about 100 ns against 155 in process).
 */
export function quoteId(id: string): string {
  return JSON.stringify(id)
}
