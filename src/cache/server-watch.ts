import type { Agent } from 'undici'
import type { EdgeCache } from './edge-cache.js'
import type { Logger } from 'pino'
import {
  canSubscribe,
  discoverCapabilities,
  filterFor,
  ListenUnsupported,
  type ListenFilter,
  type UpstreamEndpoint,
} from '../client/discover.js'
import { ListenStream } from '../client/listen-stream.js'
import { tagOf, type CachedServer } from './request.js'

/** What the invalidator needs to know about a fronted server (a ServerRuntime fits). */
export interface WatchedServer extends CachedServer {
  readonly config: CachedServer['config'] & {
    readonly timeouts: { readonly responseHeadersMs: number; readonly streamIdleMs: number }
  }
  /** The gateway's own upstream headers (static credentials); a client token never goes here. */
  readonly upstreamHeaders: readonly string[]
}

/** Timing knobs; the defaults suit production, tests shorten them. */
export interface InvalidatorOptions {
  readonly log: Logger
  /** First reconnect delay; doubles per failure up to maxDelayMs, with jitter (spec: MUST jitter). */
  readonly baseDelayMs?: number
  readonly maxDelayMs?: number
  /** Next try against a backend that offers no listen (no capability, 2025-era, refusal). */
  readonly unsupportedRetryMs?: number
  /** A stream that stayed up this long resets the backoff. */
  readonly stableAfterMs?: number
  /** Most resource URIs one listen subscribes to; the others live by their ttl alone. */
  readonly maxUris?: number
  /** Wait before re-subscribing with newly cached URIs (batches several reads into one). */
  readonly resubscribeDelayMs?: number
}

/** The listen stream of one server and its reconnect schedule. */
export class ServerWatch {
  readonly tag: string
  readonly name: string
  connected = false
  private stopped = false
  private current: ListenStream | undefined
  private caps: Record<string, unknown> | undefined
  private readonly uris = new Set<string>()
  private attempt = 0
  private seq = 0
  private timer: NodeJS.Timeout | undefined
  private resubTimer: NodeJS.Timeout | undefined
  private readonly abort = new AbortController()

  constructor(
    private readonly server: WatchedServer,
    private readonly cache: EdgeCache,
    private readonly agent: Agent,
    private readonly opts: InvalidatorOptions,
  ) {
    this.tag = tagOf(server)
    this.name = server.name
  }

  start(): void {
    this.schedule(0)
  }

  stop(): void {
    this.stopped = true
    this.connected = false
    clearTimeout(this.timer)
    clearTimeout(this.resubTimer)
    this.abort.abort(new Error('stopped'))
    this.current?.close()
    this.current = undefined
  }

  /** Adds a cached resource URI to the subscription (when the backend offers resources.subscribe). */
  watchUri(uri: string): void {
    if (this.stopped || this.uris.has(uri) || this.uris.size >= (this.opts.maxUris ?? 256)) return
    if (this.caps !== undefined && !canSubscribe(this.caps)) return
    this.uris.add(uri)
    // Without a stream, the next connect subscribes to it anyway.
    if (this.current === undefined || this.resubTimer !== undefined) return
    this.resubTimer = setTimeout(() => void this.resubscribe(), this.opts.resubscribeDelayMs ?? 250)
    this.resubTimer.unref()
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer)
    this.timer = setTimeout(() => void this.connect(), ms)
    this.timer.unref()
  }

  private async connect(): Promise<void> {
    if (this.stopped) return
    const ep = this.endpoint()
    let filter: ListenFilter | undefined
    try {
      this.caps = await discoverCapabilities(ep, this.abort.signal)
      filter = filterFor(this.caps, [...this.uris])
    } catch (err) {
      return this.failed(err)
    }
    if (filter === undefined) {
      this.opts.log.info(
        { server: this.name },
        'cache: backend sends no change notifications; entries live by ttl only',
      )
      return this.schedule(this.opts.unsupportedRetryMs ?? 600_000)
    }
    const stream = this.open(ep, filter)
    let honoured: ListenFilter
    try {
      honoured = await stream.acked
    } catch (err) {
      stream.close()
      return this.failed(err)
    }
    if (this.stopped) return stream.close()
    this.dropCovered(honoured)
    this.adopt(stream, honoured)
  }

  /** Re-listens with the grown URI set; the old stream stays open until the new one is acked. */
  private async resubscribe(): Promise<void> {
    this.resubTimer = undefined
    if (this.stopped || this.current === undefined || this.caps === undefined) return
    const filter = filterFor(this.caps, [...this.uris])
    if (filter === undefined) return
    const stream = this.open(this.endpoint(), filter)
    try {
      const honoured = await stream.acked
      // The old stream died meanwhile: connect() owns recovery (and drops what was missed).
      if (this.stopped || this.current === undefined) return stream.close()
      this.adopt(stream, honoured)
    } catch {
      stream.close()
      if (this.stopped) return
      this.resubTimer = setTimeout(() => void this.resubscribe(), this.opts.maxDelayMs ?? 30_000)
      this.resubTimer.unref()
    }
  }

  private open(ep: UpstreamEndpoint, filter: ListenFilter): ListenStream {
    return new ListenStream(ep, filter, `mcp-edge-listen:${this.seq++}`, (what) => {
      const dropped = this.cache.invalidate(this.tag, what)
      this.opts.log.debug(
        { server: this.name, what, dropped },
        'cache: invalidated by notification',
      )
    })
  }

  private adopt(stream: ListenStream, honoured: ListenFilter): void {
    const old = this.current
    this.current = stream
    this.connected = true
    old?.close()
    const since = Date.now()
    this.opts.log.info(
      { server: this.name, notifications: honoured },
      'cache: listening for changes',
    )
    void stream.ended.then((err) => {
      if (this.current !== stream) return // replaced by a re-subscription, or stopped
      this.current = undefined
      this.connected = false
      if (this.stopped) return
      if (Date.now() - since >= (this.opts.stableAfterMs ?? 10_000)) this.attempt = 0
      this.opts.log.warn(
        { server: this.name, err: err?.message },
        'cache: listen stream ended; entries of this server live by ttl only until it is back',
      )
      this.schedule(this.backoff())
    })
  }

  /** Notifications sent while no stream was open are lost: whatever the stream covers may be stale. */
  private dropCovered(honoured: ListenFilter): void {
    if (honoured.toolsListChanged === true) this.cache.invalidate(this.tag, { kind: 'tools' })
    if (honoured.promptsListChanged === true) this.cache.invalidate(this.tag, { kind: 'prompts' })
    if (honoured.resourcesListChanged === true)
      this.cache.invalidate(this.tag, { kind: 'resources' })
    for (const uri of honoured.resourceSubscriptions ?? []) {
      if (typeof uri === 'string') this.cache.invalidate(this.tag, { kind: 'resource', uri })
    }
  }

  private failed(err: unknown): void {
    if (this.stopped) return
    if (err instanceof ListenUnsupported) {
      this.opts.log.info(
        { server: this.name, reason: err.message },
        'cache: no listen stream; entries live by ttl only',
      )
      return this.schedule(this.opts.unsupportedRetryMs ?? 600_000)
    }
    const level = this.attempt === 0 ? 'warn' : 'debug'
    this.opts.log[level](
      { server: this.name, err: String(err) },
      'cache: listen failed; retrying with backoff',
    )
    this.schedule(this.backoff())
  }

  /** Exponential backoff with equal jitter (caching.mdx: pollers MUST apply jitter and backoff). */
  private backoff(): number {
    const ceiling = Math.min(
      this.opts.maxDelayMs ?? 30_000,
      (this.opts.baseDelayMs ?? 500) * 2 ** this.attempt,
    )
    this.attempt = Math.min(this.attempt + 1, 30)
    return ceiling / 2 + (Math.random() * ceiling) / 2
  }

  /** One replica per attempt, in turn, so a dead first replica does not blind the cache. */
  private endpoint(): UpstreamEndpoint {
    const ups = this.server.config.upstreams
    const up = ups[this.attempt % ups.length] ?? ups[0]
    return {
      url: up?.url ?? '',
      headers: this.server.upstreamHeaders,
      dispatcher: this.agent,
      headersTimeoutMs: this.server.config.timeouts.responseHeadersMs,
      bodyTimeoutMs: this.server.config.timeouts.streamIdleMs,
    }
  }
}
