import type { ListenMerge } from './listen-merge.js'

/**
 * The GET streams of 2025-era client sessions open in this gateway process, per virtual server
 * and session, so the session's DELETE ends them (spec 2025-11-25 basic/transports §Session
 * Management). Owned by the gateway and handed to every runtime it compiles (runtime/runtime.ts
 * RuntimeShared): a stream opened before a reload is still ended by a DELETE after it.
 */
export class SessionListens {
  readonly #open = new Map<string, Set<ListenMerge>>()

  /** Keeps `merge` findable by its session until the returned function is called. */
  track(virtualServer: string, session: string, merge: ListenMerge): () => void {
    const key = `${virtualServer}\0${session}`
    let set = this.#open.get(key)
    if (set === undefined) this.#open.set(key, (set = new Set()))
    set.add(merge)
    return () => {
      set.delete(merge)
      if (set.size === 0) this.#open.delete(key)
    }
  }

  /** Ends every stream of the session. */
  end(virtualServer: string, session: string): void {
    for (const merge of this.#open.get(`${virtualServer}\0${session}`) ?? []) merge.end()
  }
}
