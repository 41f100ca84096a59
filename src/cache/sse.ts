import { StringDecoder } from 'node:string_decoder'

const MAX_EVENT_CHARS = 1024 * 1024

/** Minimal SSE reader (HTML §9.2.6): the `data` of each complete event; comments are skipped. */
export class SseParser {
  private pending = ''
  // A chunk may end inside a multi-byte character.
  private readonly decoder = new StringDecoder('utf8')

  push(chunk: Buffer): string[] {
    this.pending += this.decoder.write(chunk)
    const out: string[] = []
    for (;;) {
      const m = /\r\n\r\n|\n\n|\r\r/.exec(this.pending)
      if (m === null) break
      const event = this.pending.slice(0, m.index)
      this.pending = this.pending.slice(m.index + m[0].length)
      const data = event
        .split(/\r\n|\n|\r/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
      if (data.length > 0) out.push(data.join('\n'))
    }
    // SECURITY: a backend that never ends an event cannot grow this buffer without bound.
    if (this.pending.length > MAX_EVENT_CHARS) throw new Error('listen event too large')
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
