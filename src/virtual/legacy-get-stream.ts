import { request } from 'undici'
import type { ListenFilter, UpstreamEndpoint } from '../cache/discover.js'
import type { Invalidation } from '../cache/key.js'
import { invalidationOf } from '../cache/listen-stream.js'
import { parseJson, SseParser } from '../cache/sse.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { NoStream, type MemberStream } from './listen-merge.js'

/** The member no longer knows the session the stream was opened in (404): initialise anew. */
export class SessionGone extends Error {
  override readonly name = 'SessionGone'
}

/**
 * A 2025-only member's standalone GET stream, opened in the member session the gateway holds
 * (spec 2025-11-25 basic/transports §Listening for Messages from the Server), as one member stream
 * of a merged listen (virtual/listen-merge.ts). A 2025-era server takes no filter: it is "open"
 * once the member answers 200 `text/event-stream`, and what it honours is what the gateway asked
 * for (the kinds its `initialize` capabilities offer). Change notifications call `onChange`;
 * anything else on the stream (server-to-client requests, log messages) is not relayed, since
 * the merged stream has no one to answer them. `ep.headers` carry the session id and version.
 */
export class LegacyGetStream implements MemberStream {
  readonly acked: Promise<ListenFilter>
  readonly ended: Promise<Error | undefined>
  private readonly abort = new AbortController()

  constructor(ep: UpstreamEndpoint, filter: ListenFilter, onChange: (what: Invalidation) => void) {
    let ack!: (f: ListenFilter) => void
    let nack!: (e: Error) => void
    this.acked = new Promise((resolve, reject) => ((ack = resolve), (nack = reject)))
    this.acked.catch(() => undefined)
    this.ended = this.run(ep, onChange, () => ack(filter)).then(
      () => (nack(new Error('GET stream ended before it opened')), undefined),
      (err: unknown) => {
        const e = err instanceof Error ? err : new Error(String(err))
        nack(e)
        return e
      },
    )
  }

  /** Ends the stream: closing it is how a client stops listening (spec 2025-11-25 §Listening). */
  close(): void {
    this.abort.abort(new Error('GET stream closed'))
  }

  private async run(
    ep: UpstreamEndpoint,
    onChange: (what: Invalidation) => void,
    opened: () => void,
  ): Promise<void> {
    const res = await request(ep.url, {
      method: 'GET',
      headers: ep.headers as string[],
      dispatcher: ep.dispatcher,
      signal: this.abort.signal,
      headersTimeout: ep.headersTimeoutMs,
      bodyTimeout: ep.bodyTimeoutMs,
    })
    const sse = /^text\/event-stream\s*(;|$)/i.test(String(res.headers['content-type'] ?? ''))
    if (res.statusCode !== 200 || !sse) {
      await res.body.dump()
      // spec 2025-11-25 basic/transports §Listening: 405 means the server offers no stream.
      if (res.statusCode === 405) throw new NoStream('the member answered its GET stream with 405')
      // §Session Management: 404 means the session is gone; the client starts a new one.
      if (res.statusCode === 404) throw new SessionGone('the member no longer knows the session')
      throw new Error(`GET stream answered ${res.statusCode}${sse ? '' : ' without a stream'}`)
    }
    opened()
    const parser = new SseParser()
    for await (const chunk of res.body) {
      for (const data of parser.push(chunk as Buffer)) {
        const msg = parseJson(data)
        // Only notifications: a server-to-client request or a stray response is not relayed.
        if (!isRecord(msg) || 'id' in msg) continue
        const what = invalidationOf(msg.method, isRecord(msg.params) ? msg.params : {})
        if (what !== undefined) onChange(what)
      }
    }
  }
}
