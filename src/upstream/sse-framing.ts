import { peekRawId } from '../mcp/jsonrpc.js'

/**
 * Keeps an SSE passthrough aligned to event boundaries (HTML Living Standard §9.2.6: an event is
 * dispatched at a blank line). Only complete events are handed on, so if the upstream dies in the
 * middle of one, the client never sees half of it (reliability B-08, S-16) and the gateway can
 * still end the stream with a well-formed error event. It also notes whether the final JSON-RPC
 * response went through, so that error is never a second answer to the same request.
 *
 * SDK servers write one event per chunk, so the common case is a tail check and no copying.
 */
export class SseFramer {
  private pending: Buffer | undefined
  /** True once an event carrying a JSON-RPC response (result or error) was passed on. */
  sawResponse = false

  /** Returns the complete events in `chunk` (plus any held-back start), holding back the rest. */
  push(chunk: Buffer): Buffer | undefined {
    const data = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk])
    const end = lastBoundary(data)
    if (end === 0) {
      this.pending = data
      return undefined
    }
    this.pending = end === data.length ? undefined : data.subarray(end)
    const out = end === data.length ? data : data.subarray(0, end)
    if (!this.sawResponse) this.sawResponse = carriesResponse(out)
    return out
  }

  /** Bytes of an event that never completed (dropped, never forwarded). */
  get heldBytes(): number {
    return this.pending?.length ?? 0
  }
}

/** Offset just past the last blank line (`\n\n`, `\r\n\r\n` or `\r\r`), or 0 when there is none. */
function lastBoundary(b: Buffer): number {
  for (let i = b.length - 1; i > 0; i--) {
    const c = b[i]
    if (c !== 0x0a && c !== 0x0d) continue
    const p = b[i - 1]
    if (c === 0x0a && p === 0x0a) return i + 1
    if (c === 0x0d && p === 0x0d) return i + 1
    if (c === 0x0a && p === 0x0d && i >= 3 && b[i - 2] === 0x0a && b[i - 3] === 0x0d) return i + 1
  }
  return 0
}

const NOTIFICATION_DATA = /^data: ?\{"method":/

/**
 * Whether these complete events include a JSON-RPC response. Notifications that start with
 * `"method"` (as every SDK writes them) are recognised without parsing; anything else is parsed.
 */
function carriesResponse(events: Buffer): boolean {
  for (const event of events.toString('utf8').split(/\r\n\r\n|\n\n|\r\r/)) {
    const lines = event.split(/\r\n|\n|\r/).filter((l) => l.startsWith('data:'))
    if (lines.length === 0) continue
    if (lines.length === 1 && NOTIFICATION_DATA.test(lines[0] as string)) continue
    try {
      const msg: unknown = JSON.parse(
        lines.map((l) => l.slice(l.startsWith('data: ') ? 6 : 5)).join('\n'),
      )
      if (
        typeof msg === 'object' &&
        msg !== null &&
        ('result' in msg || 'error' in msg) &&
        !('method' in msg)
      ) {
        return true
      }
    } catch {
      // Not JSON: not a response this gateway could count.
    }
  }
  return false
}

/**
 * A final JSON-RPC error event for an SSE stream that ended (or broke between events) without
 * answering its request; undefined when the request has no id to answer.
 */
export function unansweredEvent(requestBody: Buffer): string | undefined {
  const id = peekRawId(requestBody)
  if (id === undefined) return undefined
  return `event: message\ndata: {"jsonrpc":"2.0","id":${id},"error":{"code":-31502,"message":"Upstream stream ended before the response","data":{"source":"gateway","reason":"upstream_stream_broken"}}}\n\n`
}
