import type { MiddlewareHandler } from 'hono'
import type { GatewayEnv } from './env.js'
import { GatewayError } from '../errors.js'
import { isJsonMediaType } from '../mcp/request-head.js'
import { readBody } from './read-body.js'

const EMPTY = Buffer.alloc(0)

/**
 * Checks the media type and collects the body, bounded in size and time. MCP bodies are single
 * JSON-RPC messages the backend must have whole before it acts, so holding one costs no latency;
 * it is parsed only when a decision needs it (see classify).
 */
export const readRequest = (): MiddlewareHandler<GatewayEnv> =>
  async function readRequest(c, next) {
    const incoming = c.env.incoming
    if (incoming.method !== 'POST') {
      c.set('body', EMPTY)
      return next()
    }
    const head = c.get('head')
    // SECURITY: a compressed body would be judged on bytes the backend then inflates differently
    // (and invites decompression bombs; RFC 9110 §8.4 lets a server refuse a coding with 415).
    if (head.contentEncoding !== undefined && head.contentEncoding.toLowerCase() !== 'identity') {
      throw new GatewayError('content_encoding')
    }
    // SECURITY: a CORS-simple text/plain POST skips preflight (hono GHSA-2234-fmw7-43wr).
    if (!isJsonMediaType(head.contentType)) throw new GatewayError('unsupported_media_type')
    const limits = c.get('runtime').config.limits
    c.set(
      'body',
      await readBody(incoming, head.contentLength, limits.maxBodyBytes, limits.bodyTimeoutMs),
    )
    await next()
  }
