/** How a stream that outlived the stages ended. */
export interface StreamEnd {
  readonly outcome: string
  readonly upstreamId: string | undefined
}

type EndListener = (end: StreamEnd) => void

/**
 * What must happen when a stream that outlived the stages ends (the access line, a concurrency
 * slot, the span), run once, in the order the stages asked for it. Callbacks rather than a
 * promise: an idle stream is held for hours, and a promise would keep a reaction, a derived
 * promise and a context per listener for all that time (docs/design/hot-path.md §Stream memory).
 * A listener added after the end runs at once.
 */
export class StreamEnding {
  #listeners: EndListener[] | undefined = []
  #end: StreamEnd | undefined

  onEnd(listener: EndListener): void {
    if (this.#listeners === undefined) listener(this.#end as StreamEnd)
    else this.#listeners.push(listener)
  }

  /** Runs every listener once; a later call does nothing. */
  end(end: StreamEnd): void {
    const listeners = this.#listeners
    if (listeners === undefined) return
    this.#listeners = undefined
    this.#end = end
    for (const listener of listeners) listener(end)
  }
}
