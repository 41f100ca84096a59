import type { ListenFilter } from '../cache/discover.js'
import type { Invalidation } from '../mcp/changes.js'

/**
 * One member's notification stream: a 2026-07-28 `subscriptions/listen` (cache/listen-stream.ts)
 * or a 2025-era standalone GET stream (virtual/legacy-get-stream.ts).
 */
export interface MemberStream {
  /** Resolves with what the member honours once its stream is open; rejects when it failed. */
  readonly acked: Promise<ListenFilter>
  /** Resolves when the stream is over (an Error for why; {@link NoStream}: never re-open). */
  readonly ended: Promise<Error | undefined>
  close(): void
}

/** A member said it offers no stream at all (a 405 to its GET): it is not asked again. */
export class NoStream extends Error {
  override readonly name = 'NoStream'
}

/** One replica (and, for a 2025-only member, its session) held for one stream attempt. */
export interface MemberLease {
  open(filter: ListenFilter, id: string, onChange: (what: Invalidation) => void): MemberStream
  release(): void
}
