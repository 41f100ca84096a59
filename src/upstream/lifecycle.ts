import type { ServerResponse } from 'node:http'
import { GatewayError } from '../errors.js'

/**
 * One long-lived stream (subscriptions/listen, a 2025-era GET stream): the caller it counts
 * against, and the way to ask it to end at its next event boundary. ProxyHandler installs the
 * stop handler once the stream is running; stop() may come before or after that.
 */
export class StreamStop {
  private handler: (() => void) | undefined
  requested = false
  /** Set by Lifecycle.closeStream: the caller's count was given back (exactly once). */
  closed = false

  constructor(
    /** The caller key the stream counts against (Lifecycle.openStream). */
    readonly owner: string,
  ) {}

  /** Called by ProxyHandler once the stream is running. */
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
 * are being answered, and which open streams to end on SIGTERM. It also holds the per-caller
 * count of open streams (`limits.maxStreamsPerPrincipal`), which outlives reloads for the same
 * reason: a reload must not hand every caller a fresh allowance (docs/balancing.md §Streams).
 */
export class Lifecycle {
  private drainStarted = false
  /** Responses not yet finished or closed. */
  active = 0
  private readonly streams = new Set<StreamStop>()
  /** Open streams per caller key; a key is deleted when its count drops to 0. */
  private readonly owners = new Map<string, number>()
  private idleWaiters: (() => void)[] = []
  private readonly onResponseClose = (): void => {
    if (--this.active === 0 && this.idleWaiters.length > 0) {
      for (const wake of this.idleWaiters) wake()
      this.idleWaiters = []
    }
  }

  /**
   * The gateway's one drain flag, set only by drain(): the front door refuses new requests,
   * /readyz reports it, and ordinary answers carry `Connection: close`.
   */
  get draining(): boolean {
    return this.drainStarted
  }

  /** Counts a response until it closes (finished, failed or abandoned by the client). */
  track(res: ServerResponse): void {
    this.active++
    res.on('close', this.onResponseClose)
  }

  /**
   * Opens a stream for `owner`, or throws 429 `too_many_streams` when that caller already holds
   * `max`. Every stream returned must be given back with closeStream(), however it ends. A stream
   * opened during a drain is ended at once (but still counted until it is closed).
   */
  openStream(owner: string, max: number): StreamStop {
    const held = this.owners.get(owner) ?? 0
    // SECURITY: one caller holding idle streams must not take the capacity everyone shares.
    if (held >= max) throw new GatewayError('too_many_streams', `at most ${max} per caller`)
    this.owners.set(owner, held + 1)
    const s = new StreamStop(owner)
    if (this.draining) s.stop()
    else this.streams.add(s)
    return s
  }

  /** Gives the stream's slot back; calling it again for the same stream does nothing. */
  closeStream(s: StreamStop): void {
    if (s.closed) return
    s.closed = true
    this.streams.delete(s)
    const left = (this.owners.get(s.owner) ?? 1) - 1
    if (left <= 0) this.owners.delete(s.owner)
    else this.owners.set(s.owner, left)
  }

  /** Streams `owner` holds open right now (all callers when omitted): for tests and metrics. */
  openStreams(owner?: string): number {
    if (owner !== undefined) return this.owners.get(owner) ?? 0
    let n = 0
    for (const held of this.owners.values()) n += held
    return n
  }

  /**
   * Starts the drain: every open stream ends after its last complete event (the client sees a
   * clean end of stream and MAY reconnect, spec subscriptions.mdx), then resolves once no response
   * is in progress, or after `ms`, whichever comes first; true when everything finished.
   */
  drain(ms: number): Promise<boolean> {
    this.drainStarted = true
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
