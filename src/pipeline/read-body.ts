import type { IncomingMessage } from 'node:http'
import { GatewayError } from '../errors.js'

const EMPTY = Buffer.alloc(0)
/** Settled: `.then` on it runs once the current task's microtasks run. */
const NOW: Promise<void> = Promise.resolve()

/**
 * Collects a request body up to `maxBytes` within `timeoutMs` (docs/design/limits.md). A declared
 * Content-Length over the cap is refused before a byte is read; a chunked body is cut off the
 * moment it crosses the cap (the hono bodyLimit bypass, CVE-2026-44456, was exactly this case).
 */
export function readBody(
  req: IncomingMessage,
  declared: number | undefined,
  maxBytes: number,
  timeoutMs: number,
): Promise<Buffer> {
  // `declared` comes from the header pass the front door already made: touching req.headers
  // would make Node build its whole header object for nothing.
  if (declared !== undefined && declared > maxBytes) {
    return Promise.reject(new GatewayError('body_too_large', `limit is ${maxBytes} bytes`))
  }
  // Most bodies arrive in the read that carried the head. Node's parser pushes them right after
  // the request event, before any microtask runs; by then the whole declared length is buffered
  // and is taken as it is: no listeners, no timer (docs/design/hot-path.md §Request body).
  if (declared !== undefined && Number.isSafeInteger(declared))
    return NOW.then(() => buffered(req, declared) ?? collect(req, maxBytes, timeoutMs))
  return collect(req, maxBytes, timeoutMs)
}

/**
 * The body when all `declared` bytes are already buffered, else undefined. Node delimits the body
 * by the same Content-Length (digits only, one copy: the front door refuses two), so exactly these
 * bytes are the body; what follows belongs to the next request on the connection.
 */
function buffered(req: IncomingMessage, declared: number): Buffer | undefined {
  if (declared === 0) return EMPTY
  if (req.readableFlowing === true || req.readableLength !== declared) return undefined
  return (req.read() as Buffer | null) ?? undefined
}

/** Collects the body chunk by chunk as it arrives, within `timeoutMs`. */
function collect(req: IncomingMessage, maxBytes: number, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const timer = setTimeout(() => done(new GatewayError('body_timeout')), timeoutMs)
    const onData = (chunk: Buffer): void => {
      size += chunk.length
      if (size > maxBytes)
        return done(new GatewayError('body_too_large', `limit is ${maxBytes} bytes`))
      chunks.push(chunk)
    }
    const onEnd = (): void => done(undefined)
    const onError = (err: Error): void => done(err)
    const onClose = (): void => {
      if (!req.complete) done(new GatewayError('body_timeout', 'client went away'))
    }
    function done(err: Error | undefined): void {
      clearTimeout(timer)
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('close', onClose)
      if (err === undefined) {
        resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size))
        return
      }
      // Stop reading; the error reply closes the connection, so the rest is never consumed.
      req.pause()
      reject(err)
    }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onError)
    req.on('close', onClose)
  })
}
