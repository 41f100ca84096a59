import type { Logger } from 'pino'
import type { ServerConfig } from '../config/schema.js'
import type { McpTarget } from '../mcp/classify.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import { UpstreamFailure } from './failure.js'
import type { HeaderMap } from '../mcp/body-transform.js'
import type { ForwardResult } from './forward-types.js'
import { ActiveHealthCheck } from './health-check.js'
import { ReplicaHealth, type CheckThresholds, type HealthEvent, type ReplicaOut } from './health.js'
import type { HealthShare } from './health-share.js'
import type { Lifecycle } from './lifecycle.js'
import { UpstreamPool, type BalanceMode } from './pool.js'
import { RetryBudget, type RetrySettings } from './retry.js'
import { Route, routeFor } from './routes.js'
import { SessionCodec } from './sessions.js'
import { Upstream } from './upstream.js'

/** What every server's balancing shares with the rest of the gateway. */
export interface BalancingContext {
  readonly log: Logger
  readonly metrics: GatewayMetrics | undefined
  readonly lifecycle: Lifecycle
  /** Seals legacy session ids and task ids (legacySessions.key, or a per-process random key). */
  readonly sessionKey: Buffer
  /** With several workers: whether this one probes, and how results are shared. */
  readonly health?: HealthShare | undefined
}

/** Where `balance: {hash: …}` takes its key from. */
export interface HashSource {
  readonly from: 'header' | 'claim'
  /** Lower-case header name, or claim name as written. */
  readonly name: string
}

/**
 * Thresholds of a server without `healthCheck:`: no active check ever reports, so none is reached.
 * (The configured thresholds and their defaults live in config/schema.ts.)
 */
const NO_ACTIVE_CHECKS: CheckThresholds = { unhealthyAfter: Infinity, healthyAfter: Infinity }

/**
 * Everything about one server's replicas, compiled once from config: the replicas (one object per
 * distinct URL, shared by the main pool and the routes), pools, health checks, retry budget and
 * the legacy session codec. Nothing here is parsed per request.
 */
export class ServerBalancing {
  readonly replicas: readonly Upstream[]
  readonly pool: UpstreamPool
  readonly routes: readonly Route[]
  readonly budget: RetryBudget
  readonly retry: RetrySettings
  readonly sessions: SessionCodec
  readonly hash: HashSource | undefined
  readonly lifecycle: Lifecycle
  /**
   * Time to the response head, for all tries together (Envoy's route timeout,
   * docs/design/retries.md §Bounds).
   */
  readonly headersTimeoutMs: number
  /** Longest silence between two body chunks (SSE keep-alive comments reset it). */
  readonly streamIdleMs: number
  /** Response-header hook for ordinary requests: `Connection: close` while draining. */
  readonly onHeaders: (status: number, headers: HeaderMap) => void
  private readonly checks: ActiveHealthCheck[] = []

  constructor(
    readonly server: string,
    cfg: ServerConfig,
    staticHeaders: readonly string[],
    private readonly ctx: BalancingContext,
  ) {
    const byUrl = new Map<string, Upstream>()
    const replicas: Upstream[] = []
    const outlier = cfg.outlier // the schema fills every field (config/schema.ts)
    const thresholds = cfg.healthCheck ?? NO_ACTIVE_CHECKS
    const canEject = (h: ReplicaHealth): boolean =>
      replicas.some((r) => r.health !== h && r.available)
    const report = (h: ReplicaHealth, event: HealthEvent, detail: string): void =>
      this.report(h, event, detail)
    const replica = (url: string): Upstream => {
      const href = new URL(url).href
      let u = byUrl.get(href)
      if (u === undefined) {
        const id = `${server}#${replicas.length}`
        u = new Upstream(
          id,
          new URL(href),
          cfg.timeouts,
          cfg.maxInFlight,
          cfg.maxStreams,
          new ReplicaHealth(id, outlier, thresholds, canEject, report),
        )
        byUrl.set(href, u)
        replicas.push(u)
      }
      return u
    }
    const mode: BalanceMode = typeof cfg.balance === 'string' ? cfg.balance : 'hash'
    const poolOf = (list: readonly { url: string; weight: number }[]): UpstreamPool =>
      new UpstreamPool(
        list.map((x) => replica(x.url)),
        list.map((x) => x.weight),
        mode,
      )
    this.pool = poolOf(cfg.upstreams)
    this.routes = cfg.routes.map((r) => new Route(r, poolOf(r.upstreams)))
    this.replicas = replicas
    this.retry = cfg.retry
    this.budget = new RetryBudget(cfg.retry)
    this.sessions = new SessionCodec(ctx.sessionKey, server, replicas)
    this.hash = typeof cfg.balance === 'string' ? undefined : hashSource(cfg.balance.hash)
    this.lifecycle = ctx.lifecycle
    this.headersTimeoutMs = cfg.timeouts.responseHeadersMs
    this.streamIdleMs = cfg.timeouts.streamIdleMs
    const lifecycle = ctx.lifecycle
    this.onHeaders = (_status, headers) => {
      // Drain: tell keep-alive clients to reconnect elsewhere instead of sending more here.
      if (lifecycle.draining) headers['connection'] = 'close'
    }
    for (const u of replicas) ctx.metrics?.upstreamHealthy.set({ server, upstream: u.id }, 1)
    const share = ctx.health
    if (cfg.healthCheck !== undefined && share?.checker === false) {
      // Another worker probes; start from what it last found (docs/operations.md §Workers).
      for (const u of replicas) {
        const known = share.known(server, u.url.href)
        if (known !== undefined) u.health.mirror(known.down, known.reason)
      }
    } else if (cfg.healthCheck !== undefined) {
      for (const u of replicas) {
        const publish =
          share === undefined
            ? undefined
            : () => share.publish(server, u.url.href, u.health.down, u.health.downReason)
        this.checks.push(new ActiveHealthCheck(u, cfg.healthCheck, staticHeaders, publish))
      }
      for (const check of this.checks) check.start()
    }
  }

  /** Applies a result the checker worker published for the replica at `url`. */
  mirror(url: string, down: boolean, reason: string): void {
    for (const u of this.replicas) if (u.url.href === url) u.health.mirror(down, reason)
  }

  /** The pool for a request's targets: a matching route's, else the main one. */
  poolFor(targets: readonly McpTarget[]): UpstreamPool {
    return this.routes.length === 0 ? this.pool : (routeFor(this.routes, targets) ?? this.pool)
  }

  /** Books the outcome of an attempt that reached the client against the replica's health. */
  settled(u: Upstream, result: ForwardResult): void {
    if (result.kind === 'done') u.health.succeeded()
    // A stream that broke mid-answer is the replica's fault; a body the gateway could not use is not.
    else if (result.kind === 'broken' && !(result.cause instanceof UpstreamFailure))
      u.health.failed('stream broke')
  }

  /** Books a failed attempt: metrics, and the replica's health when it was the replica's fault. */
  failed(u: Upstream, f: UpstreamFailure): void {
    this.ctx.metrics?.upstreamFailures.inc({ server: this.server, upstream: u.id, kind: f.code })
    if (f.replicaFault) u.health.failed(f.status === undefined ? f.code : `${f.code} (${f.status})`)
  }

  /** Counts a retry decision (`retried`, `not_sent`, `budget_exhausted`, `deadline`). */
  retried(result: string): void {
    this.ctx.metrics?.retries.inc({ server: this.server, result })
  }

  /** Replicas that take no traffic, and why (for /readyz). */
  out(): ReplicaOut[] {
    const out: ReplicaOut[] = []
    for (const u of this.replicas) {
      const o = u.health.out()
      if (o !== undefined) out.push(o)
    }
    return out
  }

  /** Stops the health checks of a runtime that was replaced; its pools finish what they carry. */
  retire(): void {
    for (const c of this.checks) void c.close()
  }

  /** Stops health checks and timers, then closes every replica's connections. */
  async close(): Promise<void> {
    await Promise.all(this.checks.map((c) => c.close()))
    for (const u of this.replicas) u.health.close()
    await Promise.all(this.replicas.map((u) => u.close()))
  }

  private report(h: ReplicaHealth, event: HealthEvent, detail: string): void {
    const fields = { server: this.server, upstream: h.id, state: event, detail }
    if (event === 'down' || event === 'ejected')
      this.ctx.log.warn(fields, 'upstream out of rotation')
    else this.ctx.log.info(fields, 'upstream back in rotation')
    this.ctx.metrics?.upstreamHealthy.set(
      { server: this.server, upstream: h.id },
      h.down || h.ejected ? 0 : 1,
    )
  }
}

function hashSource(spec: string): HashSource {
  const colon = spec.indexOf(':')
  const from = spec.slice(0, colon) === 'header' ? 'header' : 'claim'
  const name = spec.slice(colon + 1)
  return { from, name: from === 'header' ? name.toLowerCase() : name }
}
