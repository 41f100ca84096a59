import type { ServerResponse } from 'node:http'

/**
 * Asks one long-lived stream (subscriptions/listen, a 2025-era GET stream) to end at its next
 * event boundary. forward() installs the handler; stop() may come before or after that.
 */
export class StreamStop {
  private handler: (() => void) | undefined
  requested = false

  /** Called by forward() once the stream is running. */
  onStop(handler: () => void): void {
    this.handler = handler
    if (this.requested) handler()
  }

  stop(): void {
    if (this.requested) return
    this.requested = true
    this.handler?.()
  }
}

/**
 * What a graceful drain needs to know, for one gateway across config reloads: how many requests
 * are being answered, and which open streams to end on SIGTERM (reliability B-28).
 */
export class Lifecycle {
  draining = false
  /** Responses not yet finished or closed. */
  active = 0
  private readonly streams = new Set<StreamStop>()
  private idleWaiters: (() => void)[] = []
  private readonly onResponseClose = (): void => {
    if (--this.active === 0 && this.idleWaiters.length > 0) {
      for (const wake of this.idleWaiters) wake()
      this.idleWaiters = []
    }
  }

  /** Counts a response until it closes (finished, failed or abandoned by the client). */
  track(res: ServerResponse): void {
    this.active++
    res.on('close', this.onResponseClose)
  }

  /** Registers a stream to end on drain; ended at once when the drain already began. */
  openStream(): StreamStop {
    const s = new StreamStop()
    if (this.draining) s.stop()
    else this.streams.add(s)
    return s
  }

  closeStream(s: StreamStop): void {
    this.streams.delete(s)
  }

  /**
   * Starts the drain: every open stream ends after its last complete event (the client sees a
   * clean end of stream and MAY reconnect, spec subscriptions.mdx), then resolves once no response
   * is in progress, or after `ms`, whichever comes first; true when everything finished.
   */
  drain(ms: number): Promise<boolean> {
    this.draining = true
    for (const s of this.streams) s.stop()
    this.streams.clear()
    if (this.active === 0) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms)
      this.idleWaiters.push(() => {
        clearTimeout(timer)
        resolve(true)
      })
    })
  }
}
