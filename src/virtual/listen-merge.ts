import type { ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import type { ListenFilter } from '../client/discover.js'
import { NoStream, type MemberLease, type MemberStream } from '../client/member-stream.js'
import type { Invalidation } from '../mcp/changes.js'
import { isRecord } from '../mcp/jsonrpc.js'
import type { StreamStop } from '../upstream/lifecycle.js'

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId'
const KEEP_ALIVE_MS = 15_000
/** A client that stops reading: its stream is ended rather than buffered without bound. */
const MAX_BUFFERED = 1024 * 1024

/** One member as a listen needs it. */
export interface ListenMember {
  readonly name: string
  /** What the member offers (its merged-discover capabilities): only that is asked for. */
  readonly capabilities: Readonly<Record<string, unknown>>
  /**
   * A replica for one stream attempt, counted against that replica's `maxStreams` until
   * `release()`; throws (GatewayError `streams_at_capacity`, `no_upstream`) when none has room.
   */
  acquire(attempt: number): MemberLease | Promise<MemberLease>
}

export interface ListenMergeOptions {
  readonly members: readonly ListenMember[]
  /** The client's filter (spec 2026-07-28 basic/patterns/subscriptions). */
  readonly filter: ListenFilter
  /** The member index that serves a resource URI (the virtual server's routing), or undefined. */
  readonly memberForUri: (uri: string) => number | undefined
  /** The listen request's id, byte for byte: it is the subscription id. */
  readonly rawId: string
  /** How long the client's acknowledgement waits for the members' (fanOutTimeoutMs). */
  readonly ackTimeoutMs: number
  /** A member's change: invalidate the merged lists, the name map and the cache. */
  readonly onChange: (member: string, what: Invalidation) => void
  readonly log: Logger
  /** Ends the client's stream at an event boundary when the gateway drains. */
  readonly stop?: StreamStop | undefined
  readonly backoff?: { readonly baseMs: number; readonly maxMs: number } | undefined
  readonly keepAliveMs?: number | undefined
  /**
   * `listen` (default): a 2026-07-28 `subscriptions/listen` stream (acknowledgement, subscription
   * ids, a final result). `get`: a 2025-era client's standalone GET stream (spec 2025-11-25
   * basic/transports §Listening for Messages from the Server): bare notifications, no
   * acknowledgement, and the stream simply ends.
   */
  readonly mode?: 'listen' | 'get' | undefined
}

/** The part of `requested` that member `i` is asked for: what it offers and, for URIs, serves. */
export function memberFilter(
  requested: ListenFilter,
  caps: Readonly<Record<string, unknown>>,
  serves: (uri: string) => boolean,
): ListenFilter | undefined {
  const offers = (kind: string, bit: string): boolean =>
    isRecord(caps[kind]) && (caps[kind] as Record<string, unknown>)[bit] === true
  const tools = requested.toolsListChanged === true && offers('tools', 'listChanged')
  const prompts = requested.promptsListChanged === true && offers('prompts', 'listChanged')
  const resources = requested.resourcesListChanged === true && offers('resources', 'listChanged')
  const uris = offers('resources', 'subscribe')
    ? (requested.resourceSubscriptions ?? []).filter(serves)
    : []
  if (!tools && !prompts && !resources && uris.length === 0) return undefined
  return {
    ...(tools && { toolsListChanged: true }),
    ...(prompts && { promptsListChanged: true }),
    ...(resources && { resourcesListChanged: true }),
    ...(uris.length > 0 && { resourceSubscriptions: uris }),
  }
}

/**
 * What each member's stream is asked for (undefined: it gets no stream): the part of the
 * client's filter it offers and, for URIs, serves. The streams a listen opens, and so the member
 * limits it is admitted by (virtual/listen.ts), are exactly these.
 */
export function memberTargets(
  members: readonly ListenMember[],
  filter: ListenFilter,
  memberForUri: (uri: string) => number | undefined,
): (ListenFilter | undefined)[] {
  return members.map((m, i) =>
    memberFilter(filter, m.capabilities, (uri) => memberForUri(uri) === i),
  )
}

/** The union of the members' honoured filters: what the client is told it will get. */
function union(filters: readonly ListenFilter[]): ListenFilter {
  const uris = new Set<string>()
  let tools = false
  let prompts = false
  let resources = false
  for (const f of filters) {
    tools ||= f.toolsListChanged === true
    prompts ||= f.promptsListChanged === true
    resources ||= f.resourcesListChanged === true
    for (const u of f.resourceSubscriptions ?? []) uris.add(u)
  }
  return {
    ...(tools && { toolsListChanged: true }),
    ...(prompts && { promptsListChanged: true }),
    ...(resources && { resourcesListChanged: true }),
    ...(uris.size > 0 && { resourceSubscriptions: [...uris] }),
  }
}

const LIST_CHANGED = {
  tools: 'notifications/tools/list_changed',
  prompts: 'notifications/prompts/list_changed',
  resources: 'notifications/resources/list_changed',
} as const

/**
 * `subscriptions/listen` on a virtual server (docs/virtual-servers.md "listen"): one listen
 * stream per member that offers part of what the client asked for, merged into the client's one
 * stream. The client's acknowledgement goes out once every member has acknowledged or
 * `ackTimeoutMs` has passed, and names the union of what the members honoured (spec 2026-07-28
 * basic/patterns/subscriptions: a server MUST NOT send types the client did not request, and
 * every notification carries the listen request's id as its subscription id). A member stream
 * that breaks is re-opened with backoff while the client's stream stays open; once it is back,
 * the list-changed kinds it covers are announced, since a change in the gap was missed.
 * Notifications that arrive together are coalesced: each kind is forwarded once.
 */
export class ListenMerge {
  private closed = false
  private readonly streams: (MemberStream | undefined)[] = []
  private readonly wakers = new Set<() => void>()
  private honoured: ListenFilter = {}
  private acked = false
  private readonly pending = new Set<string>()
  private flushQueued = false
  private keepAlive: NodeJS.Timeout | undefined
  private finished!: () => void
  /** Resolves when the client's stream is over, for whatever reason. */
  readonly done: Promise<void> = new Promise((resolve) => (this.finished = resolve))

  constructor(
    private readonly res: ServerResponse,
    private readonly opts: ListenMergeOptions,
  ) {}

  /** Starts the stream: head, member streams, the acknowledgement, then notifications. */
  start(): void {
    const { res, opts } = this
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no',
    })
    res.flushHeaders()
    res.on('close', () => this.close())
    opts.stop?.onStop(() => this.end())
    const targets = memberTargets(opts.members, opts.filter, opts.memberForUri)
    const firstAcks = targets.map((f, i) =>
      f === undefined ? Promise.resolve(undefined) : this.runMember(i, f),
    )
    const deadline = new Promise<void>((resolve) => {
      const t = setTimeout(resolve, opts.ackTimeoutMs)
      t.unref()
      void this.done.then(() => clearTimeout(t))
    })
    const honoured: (ListenFilter | undefined)[] = targets.map(() => undefined)
    // A 2025-era client was promised these kinds in `initialize` (its capabilities) and is not
    // told what a member honours: every kind some member is asked for is forwarded.
    if (opts.mode === 'get') return this.acknowledge(targets)
    const all = Promise.all(firstAcks.map((p, i) => p.then((f) => void (honoured[i] = f))))
    void Promise.race([all, deadline]).then(() => this.acknowledge(honoured))
  }

  /** Ends the client's stream gracefully (drain): a result for the listen request. */
  end(): void {
    if (this.closed) return
    if (this.opts.mode === 'get') return this.close() // 2025-era: the stream just ends
    const result = `{"resultType":"complete","_meta":{"${SUBSCRIPTION_ID}":${this.opts.rawId}}}`
    this.write(
      `event: message\ndata: {"jsonrpc":"2.0","id":${this.opts.rawId},"result":${result}}\n\n`,
    )
    this.res.end()
    this.close()
  }

  /** Stops everything: the client went away, or the stream ended. */
  close(): void {
    if (this.closed) return
    this.closed = true
    clearInterval(this.keepAlive)
    for (const s of this.streams) s?.close()
    for (const wake of this.wakers) wake()
    this.wakers.clear()
    if (!this.res.writableEnded) this.res.end()
    this.finished()
  }

  private acknowledge(honoured: readonly (ListenFilter | undefined)[]): void {
    if (this.closed) return
    this.acked = true
    this.honoured = union(honoured.filter((f): f is ListenFilter => f !== undefined))
    if (this.opts.mode !== 'get') {
      const params = `{"notifications":${JSON.stringify(this.honoured)},"_meta":{"${SUBSCRIPTION_ID}":${this.opts.rawId}}}`
      this.write(
        `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":${params}}\n\n`,
      )
    }
    if (
      Object.keys(this.honoured).length === 0 &&
      !this.opts.members.some((_, i) => this.streams[i])
    )
      return this.end() // nothing to listen to: the graceful end a server gives (subscriptions)
    this.keepAlive = setInterval(
      () => this.write(': keepalive\n\n'),
      this.opts.keepAliveMs ?? KEEP_ALIVE_MS,
    )
    this.keepAlive.unref()
    this.flush()
  }

  /**
   * Keeps member `i`'s stream open until the client's ends; resolves with its first
   * acknowledgement (undefined when its first attempt failed: it is retried, but what it would
   * have honoured is not announced).
   */
  private runMember(i: number, filter: ListenFilter): Promise<ListenFilter | undefined> {
    let first: ((f: ListenFilter | undefined) => void) | undefined
    const firstAck = new Promise<ListenFilter | undefined>((resolve) => (first = resolve))
    const member = this.opts.members[i] as ListenMember
    const loop = async (): Promise<void> => {
      let attempt = 0
      let opened = 0
      while (!this.closed) {
        let lease: MemberLease | undefined
        try {
          lease = await member.acquire(attempt)
        } catch (err) {
          first?.(undefined)
          first = undefined
          this.opts.log.warn(
            { member: member.name, err: String(err) },
            'virtual listen: no replica',
          )
        }
        if (lease !== undefined && this.closed) lease.release()
        else if (lease !== undefined) {
          const stream = lease.open(filter, `mcp-edge-virtual-listen:${opened++}`, (what) =>
            this.changed(member.name, what),
          )
          this.streams[i] = stream
          try {
            const honoured = await stream.acked
            if (first !== undefined) {
              first(honoured)
              first = undefined
            } else this.announceGap(member.name, honoured)
            attempt = 0
          } catch {
            first?.(undefined)
            first = undefined
          }
          const err = await stream.ended
          lease.release()
          if (this.closed) break
          if (err instanceof NoStream) {
            // spec 2025-11-25 basic/transports §Listening: 405 = the server offers no stream.
            this.opts.log.info(
              { member: member.name },
              'virtual listen: member offers no notification stream; not retried',
            )
            break
          }
          this.opts.log.warn(
            { member: member.name, err: err === undefined ? 'ended' : String(err) },
            'virtual listen: member stream ended; re-opening',
          )
        }
        await this.sleep(this.delay(attempt++))
      }
      first?.(undefined)
    }
    void loop()
    return firstAck
  }

  /** A member's notification: invalidate at once, forward (coalesced) when honoured. */
  private changed(member: string, what: Invalidation): void {
    if (this.closed) return
    this.opts.onChange(member, what)
    if (what.kind === 'resource') {
      this.pending.add(`resource ${what.uri}`)
    } else if (what.kind !== 'all') this.pending.add(what.kind)
    this.flush()
  }

  /** A re-opened member stream: what changed while it was down is unknown, so say it changed. */
  private announceGap(member: string, honoured: ListenFilter): void {
    if (honoured.toolsListChanged === true) this.changed(member, { kind: 'tools' })
    if (honoured.promptsListChanged === true) this.changed(member, { kind: 'prompts' })
    if (honoured.resourcesListChanged === true) this.changed(member, { kind: 'resources' })
    for (const uri of honoured.resourceSubscriptions ?? [])
      this.changed(member, { kind: 'resource', uri })
  }

  /** Writes what is pending on the next turn, so simultaneous changes go out once. */
  private flush(): void {
    if (!this.acked || this.flushQueued || this.pending.size === 0) return
    this.flushQueued = true
    setImmediate(() => {
      this.flushQueued = false
      const h = this.honoured
      for (const key of this.pending) {
        if (key.startsWith('resource ')) {
          const uri = key.slice('resource '.length)
          // SECURITY: only URIs the client subscribed to (spec: MUST NOT send unrequested types).
          if (h.resourceSubscriptions?.includes(uri) === true)
            this.notify('notifications/resources/updated', `"uri":${JSON.stringify(uri)},`)
        } else {
          const kind = key as keyof typeof LIST_CHANGED
          const wanted =
            kind === 'tools'
              ? h.toolsListChanged
              : kind === 'prompts'
                ? h.promptsListChanged
                : h.resourcesListChanged
          if (wanted === true) this.notify(LIST_CHANGED[kind], '')
        }
      }
      this.pending.clear()
    })
  }

  private notify(method: string, params: string): void {
    if (this.opts.mode === 'get') {
      const bare = params === '' ? '' : `,"params":{${params.slice(0, -1)}}`
      return this.write(`event: message\ndata: {"jsonrpc":"2.0","method":"${method}"${bare}}\n\n`)
    }
    this.write(
      `event: message\ndata: {"jsonrpc":"2.0","method":"${method}","params":{${params}"_meta":{"${SUBSCRIPTION_ID}":${this.opts.rawId}}}}\n\n`,
    )
  }

  private write(frame: string): void {
    if (this.closed || this.res.writableEnded) return
    if (this.res.writableLength > MAX_BUFFERED) {
      this.res.destroy()
      this.close()
      return
    }
    this.res.write(frame)
  }

  /** Exponential backoff with equal jitter, as the cache's own listen streams (docs/cache.md). */
  private delay(attempt: number): number {
    const base = this.opts.backoff?.baseMs ?? 250
    const ceiling = Math.min(this.opts.backoff?.maxMs ?? 30_000, base * 2 ** Math.min(attempt, 20))
    return ceiling / 2 + (Math.random() * ceiling) / 2
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(t)
        this.wakers.delete(wake)
        resolve()
      }
      const t = setTimeout(wake, ms)
      t.unref()
      this.wakers.add(wake)
    })
  }
}
