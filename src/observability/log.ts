import { pino, type DestinationStream, type Logger } from 'pino'
import { LOG_BATCH_BYTES } from './line-sink.js'

/**
 * The process logger: JSON lines on stdout (or a given stream); no console.* anywhere else.
 * Asynchronous and batched, never held back longer than 250 ms.
 */
export function createLogger(level: string, dest?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { svc: 'mcp-edge' },
      timestamp: pino.stdTimeFunctions.isoTime,
      // No `redact`: it costs ~1% CPU per line, and no code path hands pino a header, token or
      // body (test/security/jwt.test.ts greps every log line for every minted token).
    },
    // Lines are batched into writes of 4 KiB or more (one write per line cost ~8% of CPU at 7k
    // req/s), up to 64 KiB at once (access lines come in such batches: access-line.ts), and
    // flushed at least every 250 ms, so a quiet gateway still logs promptly.
    dest ??
      pino.destination({
        dest: 1,
        sync: false,
        minLength: 4096,
        maxWrite: LOG_BATCH_BYTES,
        periodicFlush: 250,
      }),
  )
}
