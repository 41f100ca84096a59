import { parseEvent, SseReader } from '../mcp/sse.js'

const MAX_EVENT_BYTES = 1024 * 1024

/**
 * The `data` of each complete event of a backend stream the gateway reads itself (listen streams,
 * server/discover), on the gateway's one SSE reader (src/mcp/sse.ts): events are framed on bytes
 * and decoded whole, so a character split across chunks arrives intact. Comments and events
 * without data are skipped; an event that is not valid UTF-8 is skipped too.
 */
export class SseParser {
  private readonly reader = new SseReader()
  private first = true

  push(chunk: Buffer): string[] {
    const batch = this.reader.push(chunk)
    // SECURITY: a backend that never ends an event cannot grow this buffer without bound.
    if (this.reader.heldBytes > MAX_EVENT_BYTES) throw new Error('listen event too large')
    const out: string[] = []
    if (batch === undefined) return out
    for (const raw of batch.events) {
      const first = this.first
      this.first = false
      try {
        const { data } = parseEvent(raw, first)
        if (data !== undefined) out.push(data)
      } catch {
        // Invalid UTF-8: not an event this gateway can act on.
      }
    }
    return out
  }
}

/** JSON.parse that answers undefined instead of throwing. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
