import { GatewayError, renderError, type ErrorCode } from '../errors.js'
import type { BodyTransform } from './body-transform.js'
import { isRecord } from './jsonrpc.js'
import { findTopLevelId } from './raw-id.js'
import { sameId } from './same-id.js'
import { parseEvent, replaceData, SseReader, type SseEvent } from './sse.js'

/**
 * Sees the final JSON-RPC response of an upstream answer (JSON body or the response event of an
 * SSE stream) and may replace it. Returning undefined keeps the original bytes untouched.
 * Hooks run in order; each sees what the previous one returned.
 */
export type ResultHook = (
  message: Record<string, unknown>,
  info: { readonly sse: boolean },
) => Record<string, unknown> | undefined

/**
 * How the hooks use the answer. `rewrite`: the client may only get what the hooks return (a policy
 * filter), so an answer too large to inspect is refused (502) rather than passed unfiltered.
 * `observe`: the hooks only look (cache capture); the client gets the backend's bytes unchanged,
 * and an answer too large to inspect is simply relayed without being observed.
 */
export type HookMode = 'rewrite' | 'observe'

/**
 * Builds a transform that applies `hooks` to the final response, for `application/json` and
 * `text/event-stream` (events pass through as they complete; only response events are parsed and
 * possibly rewritten). Other content types are not touched. `requestId` is the raw id of the
 * request: an answer read here whose id is another one is refused (502 `upstream_id_mismatch`),
 * never cached, filtered or relayed as the answer to this request.
 */
export function resultTransform(
  contentType: string,
  maxBytes: number,
  hooks: readonly ResultHook[],
  mode: HookMode = 'rewrite',
  requestId?: string,
): BodyTransform | undefined {
  const type = contentType.split(';')[0]?.trim().toLowerCase()
  if (type === 'application/json') {
    return mode === 'rewrite'
      ? new JsonResult(maxBytes, hooks, requestId)
      : new JsonTee(maxBytes, hooks, requestId)
  }
  if (type === 'text/event-stream') return new SseResult(maxBytes, hooks, mode, requestId)
  return undefined
}

function applyHooks(
  message: Record<string, unknown>,
  hooks: readonly ResultHook[],
  sse: boolean,
): Record<string, unknown> | undefined {
  let current = message
  let changed = false
  for (const hook of hooks) {
    const next = hook(current, { sse })
    if (next !== undefined) {
      current = next
      changed = true
    }
  }
  return changed ? current : undefined
}

/** A JSON-RPC response: a result or an error, and no method (requests and notifications have one). */
function isResponse(v: unknown): v is Record<string, unknown> {
  return isRecord(v) && ('result' in v || 'error' in v) && !('method' in v)
}

/**
 * SECURITY: the answer the gateway judged (filtered or cached) must be the answer to this request;
 * a missing, repeated or different id is refused (JSON-RPC 2.0 §5).
 */
function checkId(text: string, requestId: string | undefined): void {
  if (requestId !== undefined && !sameId(requestId, findTopLevelId(text))) {
    throw new GatewayError('upstream_id_mismatch')
  }
}

/**
 * Serialises a rewritten message with the id exactly as the upstream wrote it: JSON.parse turns
 * 12345678901234567890 into 12345678901234567000, and the client must get its own id back.
 */
function serialize(message: Record<string, unknown>, originalText: string): string {
  const rawId = findTopLevelId(originalText)
  if (rawId === undefined) return JSON.stringify(message)
  const { id: _id, ...rest } = message
  const body = JSON.stringify(rest)
  return body === '{}' ? `{"id":${rawId}}` : `{"id":${rawId},${body.slice(1)}`
}

function tooLarge(what: string): GatewayError {
  return new GatewayError('upstream_bad_response', {
    cause: new Error(`${what} too large to inspect`),
  })
}

/** Rewrite mode: the whole body is held (bounded), then parsed and possibly replaced. */
class JsonResult implements BodyTransform {
  readonly streaming = false
  private readonly chunks: Buffer[] = []
  private size = 0

  constructor(
    private readonly maxBytes: number,
    private readonly hooks: readonly ResultHook[],
    private readonly requestId: string | undefined,
  ) {}

  push(chunk: Buffer): undefined {
    this.size += chunk.length
    // A bounded buffer: an answer too large to inspect is refused, never silently passed unfiltered.
    if (this.size > this.maxBytes) throw tooLarge('response')
    this.chunks.push(chunk)
  }

  end(): Buffer {
    const raw = Buffer.concat(this.chunks, this.size)
    const text = raw.toString('utf8')
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch (err) {
      throw new GatewayError('upstream_bad_response', { cause: err })
    }
    // SECURITY: what is not a response cannot be filtered, so it is not relayed either.
    if (!isResponse(parsed)) throw new GatewayError('upstream_bad_response')
    checkId(text, this.requestId)
    const out = applyHooks(parsed, this.hooks, false)
    return out === undefined ? raw : Buffer.from(serialize(out, text))
  }
}

/**
 * Observe mode: the body is held (bounded) so an answer to another request can still be refused
 * with a 502; past `maxBytes` it is flushed and the rest relayed as it comes, unobserved. The
 * client always gets the backend's bytes unchanged.
 */
class JsonTee implements BodyTransform {
  readonly streaming = false
  private chunks: Buffer[] | undefined = []
  private size = 0

  constructor(
    private readonly maxBytes: number,
    private readonly hooks: readonly ResultHook[],
    private readonly requestId: string | undefined,
  ) {}

  push(chunk: Buffer): Buffer | undefined {
    if (this.chunks === undefined) return chunk
    this.size += chunk.length
    this.chunks.push(chunk)
    if (this.size <= this.maxBytes) return undefined
    // Too large to look at: relay what was held and everything after it.
    const held = Buffer.concat(this.chunks, this.size)
    this.chunks = undefined
    return held
  }

  end(): Buffer | undefined {
    if (this.chunks === undefined) return undefined
    const raw = Buffer.concat(this.chunks, this.size)
    const text = raw.toString('utf8')
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return raw // Not JSON: nothing to observe; relayed as the backend sent it.
    }
    if (isResponse(parsed)) {
      checkId(text, this.requestId)
      applyHooks(parsed, this.hooks, false)
    }
    return raw
  }
}

/**
 * SSE: whole events pass through as they complete, as the backend's bytes. Response events are
 * parsed; in rewrite mode the hooks may replace one (its other lines, `id:` and `retry:` among
 * them, are kept). An answer to another request, or (rewrite mode) an event that cannot be
 * decoded, is replaced by a gateway error event for this request and the rest of the stream
 * dropped: the head (200) is already out, so the error travels in band.
 */
class SseResult implements BodyTransform {
  readonly streaming = true
  private readonly reader = new SseReader()
  private first = true
  /** Observe mode gave up on an oversized event: the rest of the stream is relayed as is. */
  private relaying = false
  /** A gateway error event ended the answer: nothing more is relayed. */
  private closed = false

  constructor(
    private readonly maxEventBytes: number,
    private readonly hooks: readonly ResultHook[],
    private readonly mode: HookMode,
    private readonly requestId: string | undefined,
  ) {}

  push(chunk: Buffer): Buffer | undefined {
    if (this.relaying) return chunk
    if (this.closed) return undefined
    const batch = this.reader.push(chunk)
    let out: Buffer | undefined = batch?.bytes
    if (batch !== undefined) {
      // Everything but a replaced event goes out as the backend's own bytes.
      let parts: Buffer[] | undefined
      let pos = 0
      for (const raw of batch.events) {
        const replaced = this.event(raw)
        if (replaced === undefined) continue
        const at = raw.byteOffset - batch.bytes.byteOffset
        ;(parts ??= []).push(batch.bytes.subarray(pos, at), replaced)
        pos = at + raw.length
        if (this.closed) break
      }
      if (parts !== undefined) {
        if (!this.closed) parts.push(batch.bytes.subarray(pos))
        out = Buffer.concat(parts)
      }
    }
    if (this.reader.heldBytes > this.maxEventBytes && !this.closed) {
      if (this.mode === 'rewrite') throw tooLarge('SSE event')
      this.relaying = true
      const rest = this.reader.take()
      out = out === undefined ? rest : Buffer.concat([out, rest])
    }
    return out
  }

  end(): Buffer | undefined {
    // An unterminated trailing event was never complete; it is dropped, not forwarded half-done.
    return undefined
  }

  /** Undefined keeps the event's bytes; otherwise the bytes that replace them. */
  private event(raw: Buffer): Buffer | undefined {
    const first = this.first
    this.first = false
    let event: SseEvent
    try {
      event = parseEvent(raw, first)
    } catch {
      // SECURITY: a client decoding with replacement characters could read what no hook saw.
      return this.mode === 'rewrite' ? this.fail('upstream_bad_response') : undefined
    }
    if (event.data === undefined) return undefined
    let parsed: unknown
    try {
      parsed = JSON.parse(event.data)
    } catch {
      return undefined // not JSON-RPC: nothing a client would take for the answer
    }
    if (!isResponse(parsed)) return undefined
    try {
      checkId(event.data, this.requestId)
    } catch {
      return this.fail('upstream_id_mismatch')
    }
    const out = applyHooks(parsed, this.hooks, true)
    if (out === undefined || this.mode === 'observe') return undefined
    return replaceData(event, serialize(out, event.data))
  }

  /** The in-band error answer that ends this stream. */
  private fail(code: ErrorCode): Buffer {
    this.closed = true
    const body = renderError(new GatewayError(code), this.requestId).body
    return Buffer.from(`event: message\ndata: ${body}\n\n`)
  }
}
