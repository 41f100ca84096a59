import { request } from 'undici'
import type { UpstreamEndpoint } from './discover.js'
import { parseJson, SseParser } from './sse.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { outboundHeaders } from '../mcp/outbound.js'
import type { SessionHeaders } from './era-session.js'

/** The member answered the GET with something other than a stream: its status. */
export class StreamRefused extends Error {
  override readonly name = 'StreamRefused'
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

/** One message the member sent on the session's stream, as parsed JSON. */
export type SessionMessage = (message: Readonly<Record<string, unknown>>) => void

/** One reader's hold on a member session's stream. */
export interface SessionTap {
  /** Resolves once the member's stream is open (200 `text/event-stream`); rejects when it is not. */
  readonly opened: Promise<void>
  /** Resolves when the stream is over for this reader: an Error for why, undefined for an end. */
  readonly ended: Promise<Error | undefined>
  /** Stops reading; the stream is closed once nobody reads it. */
  close(): void
}

/**
 * The header list of a member session's standalone GET stream, from the list of a request in that
 * session (era-session.ts legacyHeaders): remade by the one builder of the gateway's own requests
 * (mcp/outbound.ts), so no POST header (`Content-Type`, `Accept`) is carried over.
 */
export function getHeaders(headers: readonly string[], session: SessionHeaders): string[] {
  return outboundHeaders(headers, { http: 'GET', session })
}

/**
 * A 2025-era server that answers a second GET in one session with 409 (the official v1 SDK: "Only
 * one SSE stream is allowed per session") still holds the stream the gateway just closed; it lets
 * go once it has seen the connection close. Asked again after these pauses.
 */
const CONFLICT_RETRY_MS = [10, 50, 200] as const

/** The one GET stream of one member session, and who reads it. */
class SharedGet {
  readonly readers = new Set<SessionMessage>()
  readonly abort = new AbortController()
  readonly opened: Promise<void>
  readonly ended: Promise<Error | undefined>
  /** Set when the stream is over: a new reader then opens a new one. */
  over = false

  constructor(ep: UpstreamEndpoint) {
    let open!: () => void
    let refuse!: (e: Error) => void
    this.opened = new Promise((resolve, reject) => ((open = resolve), (refuse = reject)))
    this.opened.catch(() => undefined)
    this.ended = this.run(ep, open).then(
      () => (refuse(new Error('GET stream ended before it opened')), undefined),
      (err: unknown) => {
        const e = err instanceof Error ? err : new Error(String(err))
        refuse(e)
        return e
      },
    )
    void this.ended.then(() => (this.over = true))
  }

  private async run(ep: UpstreamEndpoint, opened: () => void): Promise<void> {
    for (let retry = 0; ; retry++) {
      const res = await request(ep.url, {
        method: 'GET',
        headers: ep.headers as string[],
        dispatcher: ep.dispatcher,
        signal: this.abort.signal,
        headersTimeout: ep.headersTimeoutMs,
        bodyTimeout: ep.bodyTimeoutMs,
      })
      const sse = /^text\/event-stream\s*(;|$)/i.test(String(res.headers['content-type'] ?? ''))
      if (res.statusCode === 409 && retry < CONFLICT_RETRY_MS.length) {
        await res.body.dump()
        await pause(CONFLICT_RETRY_MS[retry] as number, this.abort.signal)
        continue
      }
      if (res.statusCode !== 200 || !sse) {
        await res.body.dump()
        throw new StreamRefused(
          res.statusCode,
          `GET stream answered ${res.statusCode}${sse ? '' : ' without a stream'}`,
        )
      }
      opened()
      const parser = new SseParser()
      for await (const chunk of res.body) {
        for (const data of parser.push(chunk as Buffer)) {
          const message = parseJson(data)
          if (!isRecord(message)) continue
          for (const read of [...this.readers]) {
            try {
              read(message)
            } catch {
              // One reader's fault is its own: the others and the stream carry on.
            }
          }
        }
      }
      return
    }
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => (signal.removeEventListener('abort', stop), resolve()), ms)
    const stop = (): void => (clearTimeout(t), reject(signal.reason as Error))
    signal.addEventListener('abort', stop, { once: true })
  })
}

/**
 * The standalone GET streams of the member sessions the gateway holds toward 2025-only members
 * (spec 2025-11-25 basic/transports §Listening for Messages from the Server), one per session
 * however many read it: a listening client's change notifications (client/legacy-get-stream.ts)
 * and a routed call's progress (client/progress-relay.ts) share it, since a 2025-era server may
 * allow one such stream per session (the official v1 SDK refuses a second with 409). A stream is
 * opened by its first reader, with that reader's endpoint (the session's replica and headers), and
 * closed when its last reader stops. Owned by MemberEras: a reload starts afresh.
 */
export class SessionStreams {
  readonly #open = new WeakMap<object, SharedGet>()
  /**
   * Members that answered a GET with 405: they offer no stream (spec 2025-11-25 basic/transports
   * §Listening), so a call's progress is not looked for there again.
   */
  readonly none = new Set<string>()

  /** Reads `session`'s stream (opening it when nobody does yet); `onMessage` gets each message. */
  tap(session: object, ep: UpstreamEndpoint, onMessage: SessionMessage): SessionTap {
    let get = this.#open.get(session)
    if (get === undefined || get.over) {
      const made = new SharedGet(ep)
      this.#open.set(session, made)
      void made.ended.then(() => {
        if (this.#open.get(session) === made) this.#open.delete(session)
      })
      get = made
    }
    const shared = get
    const reader: SessionMessage = (m) => onMessage(m)
    shared.readers.add(reader)
    let stop!: (e: Error) => void
    const stopped = new Promise<Error>((resolve) => (stop = resolve))
    let closed = false
    return {
      opened: shared.opened,
      ended: Promise.race([shared.ended, stopped]),
      close: () => {
        if (closed) return
        closed = true
        shared.readers.delete(reader)
        stop(new Error('GET stream closed'))
        if (shared.readers.size > 0) return
        if (this.#open.get(session) === shared) this.#open.delete(session)
        shared.abort.abort(new Error('GET stream closed'))
      },
    }
  }
}
