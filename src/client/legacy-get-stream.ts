import type { ListenFilter, UpstreamEndpoint } from './discover.js'
import type { Invalidation } from '../mcp/changes.js'
import { invalidationOf } from '../mcp/changes.js'
import { StreamRefused, type SessionStreams, type SessionTap } from './session-stream.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { NoStream, type MemberStream } from './member-stream.js'

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
 * The session's one stream is shared with whoever else reads it (client/session-stream.ts: a
 * routed call's progress).
 */
export class LegacyGetStream implements MemberStream {
  readonly acked: Promise<ListenFilter>
  readonly ended: Promise<Error | undefined>
  private readonly tap: SessionTap

  constructor(
    streams: SessionStreams,
    session: object,
    ep: UpstreamEndpoint,
    filter: ListenFilter,
    onChange: (what: Invalidation) => void,
  ) {
    this.tap = streams.tap(session, ep, (msg) => {
      // Only notifications: a server-to-client request or a stray response is not relayed.
      if ('id' in msg) return
      const what = invalidationOf(msg.method, isRecord(msg.params) ? msg.params : {})
      if (what !== undefined) onChange(what)
    })
    this.acked = this.tap.opened.then(
      () => filter,
      (err: unknown) => {
        throw why(err)
      },
    )
    this.acked.catch(() => undefined)
    this.ended = this.tap.ended.then((err) => (err === undefined ? undefined : why(err)))
  }

  /** Ends the stream: closing it is how a client stops listening (spec 2025-11-25 §Listening). */
  close(): void {
    this.tap.close()
  }
}

/** What a refused stream means to a listen. */
function why(err: unknown): Error {
  if (!(err instanceof StreamRefused)) return err instanceof Error ? err : new Error(String(err))
  // spec 2025-11-25 basic/transports §Listening: 405 means the server offers no stream.
  if (err.status === 405) return new NoStream('the member answered its GET stream with 405')
  // §Session Management: 404 means the session is gone; the client starts a new one.
  if (err.status === 404) return new SessionGone('the member no longer knows the session')
  return err
}
