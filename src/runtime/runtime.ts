import type { Logger } from 'pino'
import type { AuthCarryOver } from '../auth/carry-over.js'
import { compileAuth, type AuthRuntime } from '../auth/compile.js'
import { compileCards, type CardSet } from '../cards/build.js'
import { compileCatalog } from '../catalog/compile.js'
import type { ServerCatalog } from '../catalog/curate.js'
import type { DriftReporter } from '../catalog/pin-state.js'
import type { GatewayConfig, ServerConfig } from '../config/schema.js'
import { clientAddress, type ClientAddress } from '../limits/client-ip.js'
import { Limiter } from '../limits/limiter.js'
import { LimitState } from '../limits/state.js'
import { unionArgumentKeys } from '../mcp/argument-keys.js'
import type { ClassifyPolicy } from '../mcp/classify.js'
import {
  ARGUMENT_FIELDS,
  BODY_TARGET_METHODS,
  CACHEABLE_METHODS,
  CURATED_NAME_METHODS,
  NAMED_METHODS,
} from '../mcp/methods.js'
import { compileHeaderRules, type HeaderRules } from '../mcp/owned-headers.js'
import { PolicyError } from '../policy/load.js'
import type { PolicySet } from '../policy/policy.js'
import { createAuditLog, createDeadlineAudit } from '../observability/audit.js'
import { methodLabel, type GatewayMetrics } from '../observability/metrics.js'
import { ServerBalancing } from '../upstream/balancing.js'
import {
  compileDeadlines,
  ruleText,
  type DeadlineReporter,
  type ServerDeadlines,
} from '../upstream/deadlines.js'
import type { ReplicaOut } from '../upstream/health.js'
import type { HealthShare } from '../upstream/health-share.js'
import type { Lifecycle } from '../upstream/lifecycle.js'
import { sessionKey } from '../upstream/sessions.js'
import { compileVirtual, type VirtualCore } from '../virtual/compile.js'
import { SessionListens } from '../virtual/session-listens.js'

/** One fronted MCP server, compiled from config once: nothing here is parsed per request. */
export interface ServerRuntime {
  readonly name: string
  readonly config: ServerConfig
  readonly classify: ClassifyPolicy
  /** Replicas, pools, routes, health, retries and legacy sessions (docs/balancing.md). */
  readonly balancing: ServerBalancing
  /** Configured upstream headers as [name, value, …], appended to every forwarded request. */
  readonly upstreamHeaders: readonly string[]
  /** Which client headers this server's own replace, and which `Connection` may not name. */
  readonly headerRules: HeaderRules
  /** Allowed Origin values for this server. */
  readonly origins: ReadonlySet<string>
  /** Curation and pins (docs/catalog.md); undefined when the server has neither. */
  readonly catalog?: ServerCatalog | undefined
  /** `timeouts.methods`, `.tools` and `.prompts` compiled; undefined when none is set. */
  readonly deadlines?: ServerDeadlines | undefined
}

/**
 * A virtual server (docs/virtual-servers.md): its members, and a `front` that the front door,
 * authentication and classification judge requests by, as they judge any server's.
 */
export interface VirtualRuntime extends VirtualCore {
  readonly members: readonly ServerRuntime[]
  readonly front: ServerRuntime
  /** The gateway's 2025-era GET streams, carried over every reload (RuntimeShared.listens). */
  readonly listens: SessionListens
}

/** Everything a request needs, swapped atomically on reload. */
export interface GatewayRuntime {
  readonly config: GatewayConfig
  readonly servers: ReadonlyMap<string, ServerRuntime>
  /** `virtualServers:`; empty without them. */
  readonly virtualServers: ReadonlyMap<string, VirtualRuntime>
  readonly allowedHosts: ReadonlySet<string> | undefined
  /** The compiled org-wide allowlist; undefined without `policies:`. Hot reload swaps it. */
  readonly policy: PolicySet | undefined
  /** Token verifier, challenges, metadata and token exchange; undefined without `auth:`. */
  readonly auth: AuthRuntime | undefined
  /** Server Cards and the AI Catalog (docs/operations.md); undefined when not served. */
  readonly cards: CardSet | undefined
  /** Rate-limit buckets and in-flight counts; they outlive reloads (docs/rate-limits.md). */
  readonly limitState: LimitState
  /** The policy's `limits:` compiled once, over limitState; undefined without any. */
  readonly limiter: Limiter | undefined
  /** `key: ip`: the client address, through `trustedProxies` only. */
  readonly clientAddress: ClientAddress
}

/** Limit state per gateway, keyed by its lifecycle (the object that outlives every reload). */
const limitStates = new WeakMap<Lifecycle, LimitState>()

function limitStateFor(config: GatewayConfig, log: Logger, shared: RuntimeShared): LimitState {
  let state = limitStates.get(shared.lifecycle)
  if (state === undefined) {
    const metrics = shared.metrics
    state = new LimitState({
      log,
      ...(config.rateLimits && { memoryBytes: config.rateLimits.memoryBytes }),
      onFallback: () => metrics?.rateLimitFallbacks.inc(),
      draining: () => shared.lifecycle.draining,
    })
    limitStates.set(shared.lifecycle, state)
  }
  const redis = config.rateLimits?.redis
  state.useRedis(
    redis === 'cache' ? config.cache?.redis : redis,
    config.rateLimits?.commandTimeoutMs,
  )
  return state
}

/** Methods whose body a gateway feature needs to see even from a backend that checks headers. */
function parseMethodsFor(config: GatewayConfig): Set<string> {
  const methods = new Set<string>()
  // Policy names targets inside these bodies (completion refs, listen and 2025 subscribe URIs).
  if (config.policies !== undefined) for (const method of BODY_TARGET_METHODS) methods.add(method)
  // The cache key needs cursor/uri, and a hit answers with the request's raw id (docs/cache.md).
  if (config.cache !== undefined) for (const method of CACHEABLE_METHODS) methods.add(method)
  // Policy's audit lines show the call's arguments (docs/operations.md "Audit log").
  if (auditsArguments(config)) for (const method of ARGUMENT_FIELDS.keys()) methods.add(method)
  return methods
}

/** Whether audit lines show arguments: there are decisions to audit, and `audit.arguments` asks. */
function auditsArguments(config: GatewayConfig): boolean {
  return config.policies !== undefined && config.audit.arguments !== 'none'
}

/** Methods whose tool or prompt name the catalog stage resolves (pipeline/catalog.ts). */
function withCatalogMethods(methods: ReadonlySet<string>): Set<string> {
  return new Set([...methods, ...CURATED_NAME_METHODS])
}

/**
 * Methods whose arguments or URI a policy condition reads (docs/policy.md §Conditions): a server
 * with a conditional rule has them parsed even when it trusts headers.
 */
function withConditionMethods(methods: ReadonlySet<string>): Set<string> {
  return new Set([...methods, ...NAMED_METHODS.keys(), ...BODY_TARGET_METHODS])
}

/** Drift goes to the audit log and a metric (docs/catalog.md §Run-time pinning). */
function driftReporter(log: Logger, metrics: GatewayMetrics | undefined): DriftReporter {
  const audit = createAuditLog(log)
  return (event) => {
    audit.drift(event)
    metrics?.catalogDrift.inc({ server: event.server, kind: event.kind })
  }
}

/** A request cut at its deadline goes to the audit log and a counter (docs/balancing.md "Deadlines"). */
function deadlineReporter(log: Logger, metrics: GatewayMetrics | undefined): DeadlineReporter {
  const audit = createDeadlineAudit(log)
  return (e) => {
    audit({
      caller: e.caller,
      server: e.server,
      method: e.method,
      name: e.name,
      deadlineMs: e.rule.ms,
      rule: ruleText(e.rule),
      phase: e.phase,
    })
    const tool =
      e.method === 'tools/call' && e.name !== undefined
        ? (metrics?.tools.label(e.server, e.name) ?? 'other')
        : 'none'
    metrics?.deadlineExceeded.inc({
      server: e.server,
      method: methodLabel(e.method),
      tool,
      phase: e.phase,
    })
  }
}

/** What outlives a config reload: the drain state and the metrics registry of one gateway. */
export interface RuntimeShared {
  readonly lifecycle: Lifecycle
  readonly metrics: GatewayMetrics | undefined
  /** JWKS keys and exchanged tokens kept across reloads while their settings are unchanged. */
  readonly auth?: AuthCarryOver
  /** With several workers: one process probes replicas and shares the results. */
  readonly health?: HealthShare
  /** Virtual servers' 2025-era GET streams, so a DELETE after a reload still ends them. */
  readonly listens?: SessionListens
}

/** Whether the gateway seals 2025-era ids: servers that take 2025-era clients, virtual servers. */
function sealsIds(config: GatewayConfig): boolean {
  return (
    Object.values(config.servers).some((s) => s.legacyClients === 'allow') ||
    Object.keys(config.virtualServers).length > 0
  )
}

/**
 * Signs of a gateway run as several instances: workers, Redis shared by them, or a replica count
 * for the rate limits (docs/rate-limits.md §Several replicas).
 */
function severalInstances(config: GatewayConfig): boolean {
  return (
    config.workers !== 1 ||
    config.cache?.redis !== undefined ||
    config.rateLimits?.redis !== undefined ||
    (config.rateLimits?.replicas ?? 1) > 1
  )
}

/**
 * Compiles servers and their connection pools. No file I/O: `policy` is the one loaded with the
 * config (LoadedConfig.policy), so both are one snapshot; `dir` resolves the auth key files.
 */
export function createRuntime(
  config: GatewayConfig,
  log: Logger,
  dir: string,
  policy: PolicySet | undefined,
  shared: RuntimeShared,
): GatewayRuntime {
  // SECURITY: with `policies:` set a runtime never exists without its policy.
  if (config.policies !== undefined && policy === undefined)
    throw new PolicyError(['policies: is set but no policy was loaded with the config'])
  const parseMethods = parseMethodsFor(config)
  const servers = new Map<string, ServerRuntime>()
  const key = sessionKey(config.legacySessions?.key)
  // A generated key seals ids only this gateway (its workers share their primary's) can open: a
  // warning only where the config says other instances may serve the same clients
  // (docs/balancing.md §Legacy (2025-era) sessions), never for one process on a laptop or the demo.
  if (key.generated && sealsIds(config) && severalInstances(config)) {
    log.warn(
      'legacySessions.key is not set: 2025-era session ids and task ids are sealed with a random key of this gateway, so other gateway instances cannot open them; set one when several instances serve the same clients',
    )
  }
  const balancingContext = {
    log,
    metrics: shared.metrics,
    lifecycle: shared.lifecycle,
    sessionKey: key.key,
    health: shared.health,
  }
  const drift = driftReporter(log, shared.metrics)
  const deadlines = deadlineReporter(log, shared.metrics)
  for (const [name, cfg] of Object.entries(config.servers)) {
    const catalog = compileCatalog(name, cfg, config, drift)
    const catalogMethods = catalog === undefined ? parseMethods : withCatalogMethods(parseMethods)
    const conditional = policy?.hasConditions(name) === true
    const upstreamHeaders: string[] = []
    for (const [k, v] of Object.entries(cfg.headers)) upstreamHeaders.push(k, v)
    const balancing = new ServerBalancing(name, cfg, upstreamHeaders, balancingContext)
    const hashHeader = balancing.hash?.from === 'header' ? balancing.hash.name : undefined
    servers.set(name, {
      name,
      config: cfg,
      classify: {
        parseAlways: !cfg.trustHeaders,
        // The catalog stage reads (and may rewrite) the name in these bodies, as policy does.
        // SECURITY: a condition judges arguments, which a header-trusting path never reads.
        parseMethods: conditional ? withConditionMethods(catalogMethods) : catalogMethods,
        allowLegacy: cfg.legacyClients === 'allow',
        maxDepth: config.limits.maxJsonDepth,
        // SECURITY: what a condition read of the arguments must be what every backend reads.
        judgesArguments: conditional,
        // SECURITY: and no key another reader takes for one it read, even without that one.
        argumentKeys: policy?.argumentKeys(name),
      },
      balancing,
      upstreamHeaders,
      headerRules: compileHeaderRules(Object.keys(cfg.headers), hashHeader),
      origins: new Set(cfg.origins ?? config.origins),
      catalog,
      deadlines: compileDeadlines(name, cfg.timeouts, deadlines),
    })
  }
  const virtualServers = new Map<string, VirtualRuntime>()
  const listens = shared.listens ?? new SessionListens()
  for (const [name, cfg] of Object.entries(config.virtualServers)) {
    virtualServers.set(name, compileVirtualRuntime(name, cfg, servers, key.key, config, listens))
  }
  log.debug({ servers: [...servers.keys()] }, 'runtime compiled')
  const limitState = limitStateFor(config, log, shared)
  const limits = policy?.limits ?? []
  const auth = compileAuth(config, dir, shared.auth) // key files resolve against the config's folder
  return {
    config,
    servers,
    virtualServers,
    allowedHosts: config.allowedHosts === undefined ? undefined : new Set(config.allowedHosts),
    auth,
    cards: compileCards(config, auth),
    policy,
    limitState,
    limiter:
      limits.length === 0
        ? undefined
        : new Limiter(limits, limitState, config.rateLimits?.replicas ?? 1),
    clientAddress: clientAddress(config.trustedProxies),
  }
}

/**
 * A virtual server over compiled members. Its `front` is what the stages before the virtual one
 * read: its own name, every body parsed (the virtual stage routes on method, name and cursor;
 * when a member trusts headers the stage parses instead, all but that member's plain calls),
 * the origins all members allow, the client headers any member replaces. Its `balancing` is the first
 * member's only so the type is whole: no stage of the virtual pipeline forwards through it.
 */
function compileVirtualRuntime(
  name: string,
  cfg: GatewayConfig['virtualServers'][string],
  servers: ReadonlyMap<string, ServerRuntime>,
  key: Buffer,
  config: GatewayConfig,
  listens: SessionListens,
): VirtualRuntime {
  const members = cfg.members.map((m) => servers.get(m) as ServerRuntime) // load.ts checked them
  const first = members[0] as ServerRuntime
  const front: ServerRuntime = {
    name,
    // 2025-era clients are served by the gateway's own sessions (docs/virtual-servers.md
    // "2025-era clients"), whatever the members' `legacyClients` say.
    config: { ...first.config, legacyClients: 'allow', extraMethods: [], headers: {} },
    classify: {
      // virtual/handle-calls.ts trustedCall: a trusting member's calls are judged on their headers,
      // unless their audit lines show arguments, which only a read body has.
      parseAlways: auditsArguments(config) || !members.some((m) => m.config.trustHeaders),
      parseMethods: new Set(),
      allowLegacy: true,
      maxDepth: config.limits.maxJsonDepth,
      // The front parses the bodies its members' conditions judge.
      judgesArguments: members.some((m) => m.classify.judgesArguments),
      // SECURITY: and judges their keys as each member's own endpoint would, for all of them.
      argumentKeys: unionArgumentKeys(members.map((m) => m.classify.argumentKeys)),
    },
    balancing: first.balancing,
    upstreamHeaders: [],
    // SECURITY: a client header any member's config replaces is dropped for all of them.
    headerRules: compileHeaderRules(
      members.flatMap((m) => Object.keys(m.config.headers)),
      undefined,
    ),
    // SECURITY: an Origin reaches every member through this endpoint, so every member must allow it.
    origins: new Set([...first.origins].filter((o) => members.every((m) => m.origins.has(o)))),
  }
  return { ...compileVirtual(name, cfg, key, config.cache?.maxTtlMs), members, front, listens }
}

/** Stops health checks and closes every pool of a runtime that is no longer in use. */
export async function closeRuntime(rt: GatewayRuntime): Promise<void> {
  // A runtime is closed while its gateway keeps running after a reload; the limit state (and its
  // Redis connection) goes only with the gateway, once it drains.
  if (rt.limitState.draining()) rt.limitState.close()
  await Promise.all([...rt.servers.values()].map((s) => s.balancing.close()))
}

/** A replaced runtime takes no new requests: its health checks stop at once (no stale logs). */
export function retireRuntime(rt: GatewayRuntime): void {
  for (const s of rt.servers.values()) s.balancing.retire()
}

/** Replicas taking no traffic right now, and why, for /readyz. */
export function replicasOut(rt: GatewayRuntime): (ReplicaOut & { readonly server: string })[] {
  const out: (ReplicaOut & { readonly server: string })[] = []
  for (const s of rt.servers.values())
    for (const o of s.balancing.out()) out.push({ server: s.name, ...o })
  return out
}

const SINGULAR = { tools: 'tool', prompts: 'prompt', skills: 'skill' } as const

/** Definitions whose digest is not their pin, for /readyz: server and name, never the text. */
export function catalogWarnings(rt: GatewayRuntime): string[] {
  const out: string[] = []
  for (const s of rt.servers.values()) {
    const pins = s.catalog?.pins
    if (pins === undefined) continue
    const action =
      pins.mode.onDrift === 'hide' ? 'hidden until re-pinned' : 'served (onDrift: warn)'
    for (const d of pins.driftedNames())
      out.push(
        d.kind === 'instructions'
          ? `catalog: ${s.name} instructions differ from their pin; ${action}`
          : `catalog: ${s.name} ${SINGULAR[d.kind]} ${JSON.stringify(d.name)} differs from its pin; ${action}`,
      )
  }
  return out
}
