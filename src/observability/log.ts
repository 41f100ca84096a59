import { pino, type DestinationStream, type Logger } from 'pino'

/**
 * The process logger: JSON lines on stdout (or a given stream); no console.* anywhere else.
 * Asynchronous (sonic-boom coalesces lines while a write is in flight) but never held back for
 * a buffer to fill, so a quiet gateway still logs each request as it ends.
 */
export function createLogger(level: string, dest?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { svc: 'mcp-edge' },
      timestamp: pino.stdTimeFunctions.isoTime,
      // SECURITY: belt and braces; nothing should log these, but if it does they are masked.
      redact: {
        paths: ['authorization', 'headers.authorization', 'req.headers.authorization', 'token', '*.token', 'cookie'],
        censor: '[redacted]',
      },
    },
    dest ?? pino.destination({ dest: 1, sync: false }),
  )
}
