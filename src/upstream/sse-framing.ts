import { GatewayError, renderError } from '../errors.js'
import { peekRawId } from '../mcp/jsonrpc.js'
import { parseEvent, SseReader } from '../mcp/sse.js'

/**
 * Keeps an SSE passthrough aligned to event boundaries (HTML Living Standard §9.2.6: an event is
 * dispatched at a blank line). Only complete events are handed on, so if the upstream dies in the
 * middle of one, the client never sees half of it and the gateway can still end the stream with a
 * well-formed error event. It also notes whether the final JSON-RPC response went through, so that
 * error is never a second answer to the same request. The bytes handed on are the backend's own.
 *
 * SDK servers write one event per chunk, so the common case is no copying.
 */
export class SseFramer {
  private readonly reader = new SseReader()
  private first = true
  /** True once an event carrying a JSON-RPC response (result or error) was passed on. */
  sawResponse = false

  /** Returns the complete events in `chunk` (plus any held-back start), holding back the rest. */
  push(chunk: Buffer): Buffer | undefined {
    const batch = this.reader.push(chunk)
    if (batch === undefined) return undefined
    if (!this.sawResponse) {
      for (const event of batch.events) {
        if (carriesResponse(event, this.first)) this.sawResponse = true
        this.first = false
      }
    }
    return batch.bytes
  }
}

const NOTIFICATION_DATA = /^\{"method":/

/**
 * Whether this complete event is a JSON-RPC response. Notifications that start with `"method"` (as
 * every SDK writes them) are recognised without parsing; anything else is parsed.
 */
function carriesResponse(raw: Buffer, first: boolean): boolean {
  try {
    const { data } = parseEvent(raw, first)
    if (data === undefined || NOTIFICATION_DATA.test(data)) return false
    const msg: unknown = JSON.parse(data)
    return (
      typeof msg === 'object' &&
      msg !== null &&
      ('result' in msg || 'error' in msg) &&
      !('method' in msg)
    )
  } catch {
    // Not UTF-8 or not JSON: not a response this gateway could count.
    return false
  }
}

/**
 * A final JSON-RPC error event for an SSE stream that ended (or broke between events) without
 * answering its request; undefined when the request has no id to answer.
 */
export function unansweredEvent(requestBody: Buffer): string | undefined {
  const id = peekRawId(requestBody)
  if (id === undefined) return undefined
  const body = renderError(new GatewayError('upstream_stream_broken'), id).body
  return `event: message\ndata: ${body}\n\n`
}
