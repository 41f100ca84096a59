import type { IncomingMessage } from 'node:http'
import { GatewayError } from '../errors.js'

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
