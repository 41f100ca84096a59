import type { AddressInfo } from 'node:net'
import { createServer } from 'node:http'
import type { DestinationStream, Logger } from 'pino'
import { buildApp } from './app.js'
import { AuthCarryOver, type AuthStateOptions } from './auth/carry-over.js'
import { startCache, type CacheSetupOptions, type GatewayCache } from './cache/setup.js'
import type { LoadedConfig } from './runtime/load.js'
import { watchConfig, type ConfigWatcher } from './runtime/watch.js'
import { joinCluster } from './cluster/worker.js'
import { nodeListener, type AppFetch } from './pipeline/node-response.js'
import { startAdmin } from './observability/admin.js'
import { createAccessWriter } from './observability/access-line.js'
import { createLineSink } from './observability/line-sink.js'
import { createLogger } from './observability/log.js'
import { createMetrics, type GatewayMetrics } from './observability/metrics.js'
import type { RuntimeRef } from './runtime/ref.js'
import {
  closeRuntime,
  createRuntime,
  retireRuntime,
  type RuntimeShared,
  type GatewayRuntime,
} from './runtime/runtime.js'
import { Lifecycle } from './upstream/lifecycle.js'
import { SessionListens } from './virtual/session-listens.js'
import { UserAuth } from './userauth/user-auth.js'

/** How often Node looks for connections past `limits.headersTimeoutMs`. */
const HEADERS_CHECK_MS = 500

/** A running gateway. */
export interface RunningGateway {
  /** Base URL, e.g. http://127.0.0.1:8080 */
  readonly url: string
  readonly port: number
  /** Port of the admin (/metrics) listener, when configured. */
  readonly adminPort: number | undefined
  readonly log: Logger
  readonly metrics: GatewayMetrics
  readonly ref: RuntimeRef
  /** The edge cache, when `cache:` is configured (docs/cache.md). */
  readonly cache: GatewayCache | undefined
  /** Swaps in a new validated config; in-flight requests finish on the old one. */
  reload(loaded: LoadedConfig): Promise<void>
  /** Re-reads the config file and policies now, as the watcher would (SIGHUP). */
  rereadConfig(): Promise<void>
  /** Stops accepting, lets in-flight requests finish up to `drainMs`, then closes everything. */
  close(drainMs?: number): Promise<void>
}

/** Options mostly for tests: log destination and a port override. */
export interface StartOptions {
  readonly logDestination?: DestinationStream
  readonly port?: number
  /** Watch the config file and policy folder for changes (default true). */
  readonly watch?: boolean
  /** Cache clock and reconnect timing, for tests. */
  readonly cache?: CacheSetupOptions
  /** Auth clock (key cache, cooldowns, token expiry), for tests. */
  readonly auth?: AuthStateOptions
  /** A worker of `workers` > 1: no admin listener (the primary's), health shared (src/cluster/). */
  readonly worker?: boolean
  /** The admin listener's clock (sign-in sessions and their throttle), for tests. */
  readonly admin?: { readonly now?: () => number }
}

/** Starts the gateway on the configured (or given) port. */
export async function startGateway(
  loaded: LoadedConfig,
  opts: StartOptions = {},
): Promise<RunningGateway> {
  const config = loaded.config
  // One tracer per process from the starting config; a `telemetry:` change needs a restart
  // (docs/operations.md "Traces"). The OpenTelemetry SDK is loaded only when it is configured:
  // it holds about 2.5 MB of heap (docs/design/hot-path.md §Memory at rest).
  const tracing =
    config.telemetry === undefined
      ? undefined
      : (await import('./telemetry/tracing.js')).createTracing(config.telemetry)
  const root = createLogger(config.log.level, opts.logDestination)
  // Several workers write to one stdout: each line says which one.
  const log = opts.worker === true ? root.child({ pid: process.pid }) : root
  const metrics = createMetrics()
  const startedAt = Date.now()
  // The status page's state (docs/operations.md §Status page), loaded only with `admin:` (with
  // workers, the primary serves the page and every worker reports to it).
  const statusModule = config.admin === undefined ? undefined : await import('./status/process.js')
  const status = statusModule?.createProcessStatus(loaded, config.admin?.showSubjects === true)
  const worker = opts.worker === true ? joinCluster(metrics, status?.health) : undefined
  // A single process with a status page notes its own health checks (the "last health check").
  const health =
    worker?.health ??
    (status === undefined ? undefined : statusModule?.recordingHealthShare(status.health))
  // Per-user tokens (docs/auth.md §Per-user credentials): their store outlives reloads too.
  const userAuth = new UserAuth({ log, now: opts.auth?.now })
  // Drain state and metrics outlive config reloads (docs/balancing.md §Graceful drain).
  const shared: RuntimeShared = {
    lifecycle: new Lifecycle(),
    listens: new SessionListens(),
    metrics,
    auth: new AuthCarryOver({ ...opts.auth, users: userAuth }),
    ...(health === undefined ? {} : { health }),
  }
  const ref: RuntimeRef = {
    current: createRuntime(config, log, loaded.dir, loaded.policy, shared),
    lifecycle: shared.lifecycle,
  }
  worker?.attach(ref)
  let watcher: ConfigWatcher | undefined
  const cache = startCache(config.cache, { log, metrics }, opts.cache)
  cache?.sync(ref.current.servers.values(), config.cache)
  // Before the listener opens: a gateway that answers uses its shared tier from its first request
  // (bounded; without Redis it starts memory-only, docs/cache.md §Shared tier).
  await cache?.connect()
  // A custom destination (tests) gets one line per write; stdout gets batched writes.
  const sink =
    log.level === 'silent'
      ? undefined
      : createLineSink(log, { batch: opts.logDestination === undefined })
  const access = createAccessWriter(log, sink)
  const deps = {
    ref,
    log,
    metrics,
    access,
    cache: cache?.cache,
    tracing,
    userAuth,
    ...(status !== undefined && { tapAudit: status.tapAudit }),
  }
  // One app per runtime, built on first use: a reload (or a policy swap, which makes a new runtime
  // object) gets a pipeline with exactly the stages its config needs.
  const apps = new WeakMap<GatewayRuntime, ReturnType<typeof buildApp>>()
  const appFor = (rt: GatewayRuntime): ReturnType<typeof buildApp> => {
    let app = apps.get(rt)
    if (app === undefined) {
      app = buildApp(deps, rt)
      apps.set(rt, app)
    }
    return app
  }
  // The app of the current runtime, looked up once per runtime rather than once per request.
  let served = ref.current
  let serve: AppFetch = appFor(served).fetch
  const dispatch: AppFetch = (req, env) => {
    const rt = ref.current
    if (rt !== served) {
      served = rt
      serve = appFor(rt).fetch
    }
    return serve(req, env)
  }
  const server = createServer(
    {
      maxHeaderSize: config.limits.maxHeaderBytes,
      // Slowloris guard (Node CVE-2018-12122); the body has its own deadline in readBody.
      headersTimeout: config.limits.headersTimeoutMs,
      // Node only checks headersTimeout every connectionsCheckingInterval (30 s by default), so a
      // slow header block could hold a connection 30 s past the limit; checking twice a second
      // keeps the limit to within half a second. The check walks only connections still reading
      // a request, so it costs next to nothing.
      connectionsCheckingInterval: HEADERS_CHECK_MS,
      // 0 = Node sets no limit on receiving the whole request: the header block has
      // headersTimeout, and the body limits.bodyTimeoutMs in readBody, which answers a JSON-RPC 408
      // rather than Node's bare one. (Node refuses a headersTimeout above a non-zero requestTimeout.)
      requestTimeout: 0,
      keepAliveTimeout: 5000,
      // SECURITY: never relax llhttp (request smuggling CVEs); stated, not defaulted.
      insecureHTTPParser: false,
      // SECURITY: RFC 9112 §3.2: an HTTP/1.1 request without Host is answered 400 (Node's default,
      // stated because nothing after this point would notice a missing Host).
      requireHostHeader: true,
    },
    // Requests reach hono without a web Request, and answers written by a stage go out without a
    // web Response (docs/design/hot-path.md). The listener counts every response in progress
    // first, so a drain knows when the last accepted request is done.
    nodeListener(dispatch, (res) => shared.lifecycle.track(res)),
  )
  // Node silently drops headers past maxHeadersCount; 0 lifts that so our own count check sees
  // them all (the byte size stays bounded by maxHeaderSize).
  server.maxHeadersCount = 0
  // Runtimes a reload replaced, until their pools close: the page shows what they still carry.
  const retiring = new Set<GatewayRuntime>()
  const report = status?.reporter({
    ref,
    retiring: () => retiring,
    watcherWarnings: () => watcher?.warnings() ?? [],
    cache: cache?.cache,
    startedAt,
  })
  if (worker !== undefined && report !== undefined) worker.serveStatus(report)
  const source =
    worker === undefined && report !== undefined
      ? statusModule?.localSource(report, metrics.registry)
      : undefined
  const page =
    config.admin === undefined || source === undefined
      ? undefined
      : (await import('./status/web/admin-page.js')).createStatusPage(source, {
          admin: config.admin,
          workers: 1,
          startedAt,
          metrics: metrics.registry,
          now: opts.admin?.now,
          // Who is connected to userAuth servers (this process's store, or the shared one).
          userTokens: {
            list: () => userAuth.connections(ref.current.config),
            showSubjects: config.admin.showSubjects,
          },
        })
  for (const warning of page?.warnings ?? []) log.warn(warning)
  // A gateway is ready only when every listener it was configured with listens: the admin
  // listener binds first, and the data port (its /healthz and /readyz included) opens only after
  // it (docs/operations.md §Readiness). Either failing stops the start, nothing left open.
  let admin: Awaited<ReturnType<typeof startAdmin>> | undefined
  try {
    if (config.admin !== undefined && page !== undefined)
      admin = await startAdmin(config.admin.host, config.admin.port, page.listener)
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(opts.port ?? config.listen.port, config.listen.host, () => {
        server.off('error', reject)
        resolve()
      })
    })
  } catch (err) {
    await admin?.close()
    page?.close()
    await cache?.close()
    await closeRuntime(ref.current)
    await userAuth.close()
    await tracing?.shutdown()
    access.close()
    throw err
  }
  if (admin !== undefined)
    log.info({ host: config.admin?.host, port: admin.port }, 'admin listening')
  const port = (server.address() as AddressInfo).port
  const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host
  log.info({ host: config.listen.host, port, servers: Object.keys(config.servers) }, 'listening')
  const reload = async (next: LoadedConfig): Promise<void> => {
    const old = ref.current
    ref.current = createRuntime(next.config, log, next.dir, next.policy, shared)
    status?.config.applied('config', next.config, next.policy)
    // A changed admin.token takes effect now and ends every sign-in made with the old one.
    page?.setToken(next.config.admin?.token)
    cache?.sync(ref.current.servers.values(), next.config.cache)
    retireRuntime(old)
    retiring.add(old)
    // Let requests that started on the old runtime finish before its pools close.
    setTimeout(() => {
      retiring.delete(old)
      void closeRuntime(old)
    }, next.config.shutdown.drainMs).unref()
  }
  if (opts.watch !== false) {
    watcher = watchConfig({
      loaded,
      log,
      applyConfig: reload,
      // Policies alone change: swap just them, so pools and open streams are untouched.
      applyPolicy: (policy) => {
        ref.current = { ...ref.current, policy }
        status?.config.applied('policies', ref.current.config, policy)
      },
    })
  }

  return {
    url: `http://${host}:${port}`,
    port,
    adminPort: admin?.port,
    log,
    metrics,
    ref,
    cache,
    reload,
    rereadConfig: () => watcher?.check() ?? Promise.resolve(),
    async close(drainMs = config.shutdown.drainMs) {
      watcher?.close()
      // New requests are refused from here on; in-flight requests finish (up to drainMs); listen
      // and 2025-era GET streams end after their last complete event; then whatever is left, idle
      // keep-alive sockets included, is closed.
      const drained = shared.lifecycle.drain(drainMs)
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeIdleConnections()
      const finished = await drained
      if (!finished)
        log.warn({ drainMs }, 'drain deadline reached; closing the remaining connections')
      server.closeAllConnections()
      await closed
      await cache?.close() // listen streams first: they hold upstream connections
      await closeRuntime(ref.current)
      await userAuth.close()
      page?.close()
      await admin?.close()
      // Spans of the last requests are exported before the process goes.
      await tracing?.shutdown()
      access.close()
      log.flush()
    },
  }
}
