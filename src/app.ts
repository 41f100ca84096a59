import { Hono, type Context } from 'hono'
import type { Logger } from 'pino'
import type { EdgeCache } from './cache/edge-cache.js'
import type { GatewayEnv } from './pipeline/env.js'
import type { AccessWriter } from './observability/access-line.js'
import type { GatewayMetrics } from './observability/metrics.js'
import { GatewayError, renderError, toGatewayError } from './errors.js'
import { peekRawId } from './mcp/jsonrpc.js'
import { accessLog } from './pipeline/access-log.js'
import { authenticate } from './pipeline/authenticate.js'
import { admitRequest } from './pipeline/admit.js'
import { catalogView } from './pipeline/catalog.js'
import { chain, type Stage } from './pipeline/chain.js'
import { classifyRequest } from './pipeline/classify.js'
import { frontDoor } from './pipeline/front-door.js'
import { edgeCache } from './pipeline/edge-cache.js'
import { ALREADY_SENT } from './pipeline/node-response.js'
import { proxy } from './pipeline/proxy.js'
import { createAuditLog, type AuditLog } from './observability/audit.js'
import { argumentsViewFor } from './observability/redact.js'
import { compileClientGates } from './match/clients.js'
import { ScopeGate } from './auth/scopes.js'
import { compileEndpoints } from './endpoint/endpoint.js'
import { readRequest } from './pipeline/read-request.js'
import { virtualStage } from './pipeline/virtual.js'
import { traceCacheMiss, traceMark, traceRequest } from './pipeline/trace.js'
import { EVENT } from './telemetry/events.js'
import type { Tracing } from './telemetry/tracing.js'
import { PRM_ROUTES, protectedResourceMetadata } from './pipeline/well-known.js'
import { mountConnect } from './pipeline/connect.js'
import type { UserAuth } from './userauth/user-auth.js'
import {
  aiCatalog,
  CARD_ROUTE,
  CATALOG_PATH,
  cardPreflight,
  serverCard,
} from './pipeline/server-card.js'
import type { RuntimeRef } from './runtime/ref.js'
import type { GatewayRuntime } from './runtime/runtime.js'

/** What the app needs from the process around it. */
export interface GatewayDeps {
  readonly ref: RuntimeRef
  readonly log: Logger
  readonly metrics: GatewayMetrics
  /** Access-log line writer (observability/access-line.ts). */
  readonly access: AccessWriter
  /**
   * Wraps the audit log when the status page listens to its denial events (status/tap.ts);
   * undefined without `admin:`.
   */
  readonly tapAudit?: ((audit: AuditLog) => AuditLog) | undefined
  /** The edge cache, when `cache:` is configured. */
  readonly cache?: EdgeCache | undefined
  /** OpenTelemetry tracer, when `telemetry:` is configured. */
  readonly tracing?: Tracing | undefined
  /** Per-user tokens of `userAuth` servers and their connect page (docs/auth.md). */
  readonly userAuth?: UserAuth | undefined
}

/**
 * The whole request path, in order, on one screen, for one runtime: stages a config does not use
 * are left out (each costs an async hop per request), and a reload builds a new app (server.ts).
 */
export function buildApp(deps: GatewayDeps, runtime: GatewayRuntime): Hono<GatewayEnv> {
  const app = new Hono<GatewayEnv>()
  const onError = (err: Error, c: Context<GatewayEnv>): Response =>
    respondWithError(c, err, deps.log)
  app.onError(onError)
  app.notFound((c) => respondWithError(c, new GatewayError('unknown_server'), deps.log))

  app.get('/healthz', (c) => c.json({ status: 'ok' }))
  // Readiness, and nothing else (docs/operations.md §Readiness): a rejected reload, replicas out,
  // names a virtual server cannot expose and drifted definitions are not readiness problems
  // (every gateway replica sees the same edit and the same backends; failing on them would turn
  // one bad edit or one dead backend into a full outage) and are shown where only operators look:
  // /readyz and the status page on the admin listener.
  // SECURITY: this port answers anyone who can reach the gateway, unauthenticated; the details
  // name hidden and admin-only tools, policy file paths and config keys (docs/security.md).
  app.get('/readyz', (c) => {
    c.header('cache-control', 'no-store')
    return deps.ref.lifecycle.draining
      ? c.json({ ready: false, draining: true }, 503)
      : c.json({ ready: true }, 200)
  })
  // RFC 9728 protected resource metadata, root and per server (spec 2026-07-28 §8)
  app.on('GET', [...PRM_ROUTES], protectedResourceMetadata(deps.ref))
  // Server Cards and the AI Catalog (docs/operations.md §Server Cards): public documents built
  // per config, before and apart from the MCP pipeline. `/mcp/:server/server-card` has two
  // segments, so it is never the MCP endpoint `/mcp/:server`; other methods get the 404 of an
  // unknown path.
  app.get(CARD_ROUTE, serverCard(runtime))
  app.get(CATALOG_PATH, aiCatalog(runtime))
  app.options(CARD_ROUTE, cardPreflight)
  app.options(CATALOG_PATH, cardPreflight)
  // The connect page of `userAuth` servers (docs/auth.md §The connect page), outside /mcp/.
  const connect = deps.userAuth?.flow(runtime.config)
  if (connect !== undefined && runtime.auth !== undefined)
    mountConnect(app, connect, runtime.auth.prefix)

  const tracing = deps.tracing
  // One audit log for every stage, so one request's lines reach the log in order; call arguments
  // only as `audit.arguments` says (observability/redact.ts).
  const view = argumentsViewFor(runtime.config.audit, deps.log)
  const logged = createAuditLog(deps.log, deps.access.sink, view)
  const audit = deps.tapAudit === undefined ? logged : deps.tapAudit(logged)
  // Scopes per target and client allowlists (docs/auth.md), compiled once per config like the rest.
  const scopes = ScopeGate.compile(runtime.config, runtime.auth)
  const judging = { audit, metrics: deps.metrics, scopes }
  const limiting = runtime.limiter && {
    limiter: runtime.limiter,
    audit,
    metrics: deps.metrics,
    clientAddress: runtime.clientAddress,
    policyId: runtime.policy?.id ?? '',
  }
  // One endpoint per server (endpoint/endpoint.ts): the one admission every request to it passes,
  // directly or as a virtual server's member. Compiled per runtime, as the app is.
  const policy = runtime.policy
  const tracingOn = tracing !== undefined
  const endpoints = compileEndpoints(runtime.servers.values(), {
    ...judging,
    policy,
    limiting,
    tracing: tracingOn,
    auth: runtime.auth,
  })
  const catalogs = [...runtime.servers.values()].some((s) => s.catalog !== undefined)
  // The stages every /mcp/<name> request runs through, a server's or a virtual server's alike.
  const front: (Stage | undefined | false)[] = [
    accessLog(deps.access, deps.metrics), // outermost: sees every outcome
    tracing && traceRequest(tracing), // one server span per request (docs/operations.md)
    frontDoor(deps.ref, runtime), // draining, server, method, Host, Origin, header count, duplicates
    runtime.auth && authenticate(runtime.auth, compileClientGates(runtime.config), audit), // bearer token → principal; 401/403 before any body is read
    tracing && runtime.auth && traceMark(EVENT.auth, { result: 'ok' }),
    readRequest(), // media type, bounded body
    classifyRequest(), // SEP-2243 headers, body only where needed
  ]
  const direct = chain(
    present([
      ...front,
      catalogs && catalogView(), // curated names → the backend's; pins (docs/catalog.md)
      admitRequest(endpoints), // scopes, policy, limits, skills answers (endpoint/admit.ts); before the cache
      deps.cache && edgeCache(deps.cache, deps.log), // cacheable results served from the edge
      tracing && deps.cache && traceCacheMiss(),
      proxy(deps.metrics.tools, endpoints), // credentials (RFC 8693), replica choice, streaming forward
    ]),
    onError,
  )
  if (runtime.virtualServers.size === 0) {
    app.all('/mcp/:server', direct)
    return app
  }
  // Virtual servers (docs/virtual-servers.md): judged by the same front stages, then answered by
  // the virtual stage, which reaches each member through the member's own path (endpoint/).
  const virtual = chain(
    present([
      ...front,
      virtualStage({
        log: deps.log,
        metrics: deps.metrics,
        cache: deps.cache,
        endpoints,
      }),
    ]),
    onError,
  )
  const virtuals = runtime.virtualServers
  // SECURITY: the server segment is looked up exactly: no pattern is ever built from configured
  // names (a virtual name is never a server name: config/virtual-check.ts).
  app.all('/mcp/:server', function route(c, next) {
    return virtuals.has(c.req.param('server')) ? virtual(c, next) : direct(c, next)
  })
  return app
}

function present(stages: readonly (Stage | undefined | false)[]): Stage[] {
  return stages.filter((s): s is Stage => typeof s === 'function')
}

/** The only place an error becomes a response. */
function respondWithError(c: Context<GatewayEnv>, err: unknown, log: Logger): Response {
  const gerr = toGatewayError(err)
  c.set('outcome', gerr.code)
  if (gerr.code === 'internal') log.error({ err: gerr.cause ?? err }, 'internal error')
  const outgoing = c.env.outgoing
  if (outgoing.headersSent) {
    // Too late for a reply: break the connection so the client cannot take a partial answer.
    outgoing.destroy()
    return ALREADY_SENT
  }
  const rawId = c.get('mcp')?.message?.rawId ?? peekRawId(c.get('body'))
  const rendered = renderError(gerr, gerr.code === 'origin_not_allowed' ? undefined : rawId)
  const headers: Record<string, string> = { ...rendered.headers }
  if (rendered.status === 405) headers.allow = 'POST'
  // The rest of an oversized or stalled body is never read, so the connection cannot be reused.
  if (rendered.status === 413 || rendered.status === 408) headers.connection = 'close'
  // Draining: the client should take its next request to another gateway instance.
  if (gerr.code === 'shutting_down') headers.connection = 'close'
  return new Response(rendered.body, { status: rendered.status, headers })
}
