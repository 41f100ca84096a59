import { GatewayError, renderError, type ErrorCode } from '../errors.js'
import {
  applyHooks,
  notSeen,
  readJudged,
  serialize,
  type HookMode,
  type ResultHook,
} from './answer-hooks.js'
import { eventProblem, scanAnswerText, type ExpectedId } from './answer-scan.js'
import type { BodyTransform } from './body-transform.js'
import { parseEvent, replaceData, SseReader, type SseEvent } from './sse.js'

/**
 * Every `text/event-stream` answer, in all three readings (answer-hooks.ts `HookMode`). Only
 * whole events reach the client (HTML Living Standard §9.2.6: an event is dispatched at a blank
 * line), as the backend's bytes, so when the backend dies in the middle of one the gateway can
 * still end the stream with a well-formed error event. Each message is checked (answer-scan.ts):
 * a response with another request's id, or data that starts as JSON and is not one object, is
 * replaced by a gateway error event for this request and the rest of the stream dropped (the 200
 * head is already out, so the error travels in band). In rewrite mode the hooks may replace the
 * response (its other lines, `id:` and `retry:` among them, are kept), and a response they
 * cannot read exactly as every client would ends the stream the same way. An event larger than
 * `maxEventBytes` is refused in rewrite and pass mode, and relayed unobserved in observe mode.
 */
export class SseAnswer implements BodyTransform {
  readonly streaming = true
  private readonly reader = new SseReader()
  private first = true
  /** Observe mode gave up on an oversized event: the rest of the stream is relayed as is. */
  private relaying = false
  /** A gateway error event ended the answer: nothing more is relayed. */
  private closed = false
  /** The hooks were told they will not see the response (a stalled client): they are not run. */
  private unseen = false
  /** True once the final JSON-RPC response (or the gateway's error in its place) went out. */
  answered = false

  constructor(
    private readonly maxEventBytes: number,
    private readonly hooks: readonly ResultHook[],
    private readonly mode: HookMode,
    private readonly expected: ExpectedId,
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
      if (this.mode !== 'observe') {
        const error = this.fail('upstream_bad_response')
        this.reader.take()
        return out === undefined ? error : Buffer.concat([out, error])
      }
      this.relaying = true
      notSeen(this.hooks)
      const rest = this.reader.take()
      out = out === undefined ? rest : Buffer.concat([out, rest])
    }
    return out
  }

  stalled(): void {
    if (this.mode !== 'observe' || this.answered || this.relaying || this.unseen) return
    this.unseen = true
    notSeen(this.hooks)
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
      // SECURITY: a client decoding with replacement characters could read what no check saw.
      return this.fail('upstream_unreadable')
    }
    const data = event.data
    if (data === undefined || !startsJson(data)) return undefined
    const shape = scanAnswerText(data)
    const problem = eventProblem(shape, this.expected)
    if (problem !== undefined) return this.fail(problem)
    if (!shape.response) return undefined
    this.answered = true
    if (this.mode === 'pass') return undefined
    let message: Record<string, unknown>
    try {
      message = readJudged(data, shape)
    } catch (err) {
      if (this.mode === 'observe') {
        notSeen(this.hooks)
        return undefined
      }
      return this.fail(err instanceof GatewayError ? err.code : 'upstream_unreadable')
    }
    if (this.unseen) return undefined
    const out = applyHooks(message, this.hooks, true)
    if (out === undefined || this.mode === 'observe') return undefined
    return replaceData(event, serialize(out, shape.rawId))
  }

  /** The in-band error answer that ends this stream. */
  private fail(code: ErrorCode): Buffer {
    this.closed = true
    this.answered = true
    const id = typeof this.expected === 'string' ? this.expected : undefined
    const body = renderError(new GatewayError(code), id).body
    return Buffer.from(`event: message\ndata: ${body}\n\n`)
  }
}

/** Whether the data is JSON text of an object or an array: a message, or a batch of them. */
function startsJson(data: string): boolean {
  for (let i = 0; i < data.length; i++) {
    const c = data.charCodeAt(i)
    if (c === 0x7b || c === 0x5b) return true
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return false
  }
  return false
}

/**
 * A final JSON-RPC error event for an SSE stream that ended (or broke between events) without
 * answering its request; undefined when the request has no id to answer.
 */
export function unansweredEvent(expected: ExpectedId): string | undefined {
  if (typeof expected !== 'string') return undefined
  const body = renderError(new GatewayError('upstream_stream_broken'), expected).body
  return `event: message\ndata: ${body}\n\n`
}
