import { z } from 'zod'
import { parseCidr } from './cidr.js'
import { methodKeyProblem } from './deadline-keys.js'
import { parseRedactPath } from './redact-paths.js'
import { introspection, userAuth, userTokens } from './user-auth-schema.js'

/**
 * The gateway's YAML config, strictly: unknown keys and wrong types are startup errors that name
 * their path (the agentgateway `deny_unknown_fields` / fastify "validate then freeze" approach).
 * Defaults live here and nowhere else.
 */

const url = z.url({ protocol: /^https?$/, error: 'invalid URL (http or https expected)' })
const positiveMs = z.int().positive()
const nonNegativeMs = z.int().nonnegative()
/** `*` matches any run of characters; everything else matches byte for byte. */
const patterns = z.array(z.string().min(1))

const upstream = z.strictObject({
  url,
  weight: z.int().min(1).max(1000).default(1),
})

/** Milliseconds per name or pattern (`*` matches any run of characters). */
const deadlines = z.record(z.string().min(1), positiveMs)
const methodDeadlines = deadlines.superRefine((entries, ctx) => {
  for (const key of Object.keys(entries)) {
    const problem = methodKeyProblem(key)
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem, path: [key] })
  }
})

const timeouts = z.strictObject({
  connectMs: positiveMs.default(2000),
  responseHeadersMs: positiveMs.default(30_000),
  /** Longest silence between two chunks of a response body (SSE keep-alives reset it); 0 = none. */
  streamIdleMs: nonNegativeMs.default(300_000),
  /**
   * Deadlines per method, tool and prompt (names or `*` patterns; the most specific wins): each
   * replaces responseHeadersMs for its requests and also bounds a streamed (SSE) answer whole
   * (docs/balancing.md "Deadlines"). Long-lived streams (listen, 2025-era GET) have none.
   */
  methods: methodDeadlines.optional(),
  tools: deadlines.optional(),
  prompts: deadlines.optional(),
})

const healthCheck = z.strictObject({
  intervalMs: positiveMs.default(5000),
  timeoutMs: positiveMs.default(1000),
  unhealthyAfter: z.int().min(1).default(3),
  healthyAfter: z.int().min(1).default(2),
})

const balance = z.union([
  z.enum(['least-request', 'round-robin']),
  z.strictObject({
    hash: z.string().regex(/^(header|claim):.+$/, 'expected "header:<Name>" or "claim:<name>"'),
  }),
])

const route = z.strictObject({
  tools: patterns.optional(),
  prompts: patterns.optional(),
  resources: patterns.optional(),
  upstreams: z.array(upstream).min(1),
})

const retry = z.strictObject({
  /** Extra attempts for a safe method that may have reached a replica (never for tools/call). */
  attempts: z.int().min(0).max(2).default(1),
  /** Retries allowed as a share of in-flight requests (Envoy retry budget). */
  budgetPercent: z.number().min(0).max(100).default(20),
  minConcurrent: z.int().min(0).default(3),
  /** Full-jitter backoff base before a retry (Envoy router: 25 ms). */
  backoffBaseMs: nonNegativeMs.default(25),
  /** Response-head timeout of one try; unset = whatever is left of timeouts.responseHeadersMs. */
  perTryTimeoutMs: positiveMs.optional(),
})

/** Passive ejection of a replica after consecutive failures (Envoy outlier detection). */
const outlier = z.strictObject({
  consecutiveFailures: z.int().min(1).default(5),
  baseEjectionMs: positiveMs.default(30_000),
  maxEjectionMs: positiveMs.default(300_000),
})

/** RFC 6749 §3.3 scope-token: it goes into a quoted `WWW-Authenticate` parameter as is. */
const scopeToken = z
  .string()
  .regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'invalid scope (RFC 6749 scope-token)')

/** Target name pattern → the scopes a call of a matching target needs (non-empty). */
const scopesByName = z.record(z.string().min(1), z.array(scopeToken).min(1))
const targetScopes = z.strictObject({
  tools: scopesByName.optional(),
  prompts: scopesByName.optional(),
  /** By resource URI (patterns), as policy's `resources:`. */
  resources: scopesByName.optional(),
})

/** RFC 8693 token exchange: the caller's token is traded for one meant for this backend. */
const tokenExchange = z.strictObject({
  tokenUrl: url,
  clientId: z.string().min(1),
  clientSecret: z.string().min(1),
  /** How the gateway authenticates to the token endpoint (RFC 6749 §2.3.1). */
  clientAuth: z.enum(['basic', 'post']).default('basic'),
  audience: z.string().min(1).optional(),
  resource: url.optional(),
  scope: z.string().optional(),
  timeoutMs: positiveMs.default(5000),
})

/**
 * A curated tool or prompt name (docs/catalog.md §Curation): what clients commonly accept and the
 * spec recommends (spec 2026-07-28 server/tools §Tool names: 1 to 128 of A-Z a-z 0-9 _ - .), so a
 * rename never introduces a name a client rejects or a reader sees differently.
 */
const curatedName = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,128}$/, 'expected 1 to 128 of A-Z a-z 0-9 _ - . (spec tool names)')
/** Replacement text a model reads; empty text would hide what the tool does. */
const curatedText = z.string().min(1, "empty text; leave the key out to keep the backend's")

/** How one backend prompt is shown (keyed by the backend's own name). */
const promptCuration = z.strictObject({
  /** The name clients see and call; the backend's own name is then unknown to clients. */
  name: curatedName.optional(),
  title: curatedText.optional(),
  description: curatedText.optional(),
  /** Absent from lists and unknown to calls. */
  hidden: z.boolean().default(false),
})

/** How one backend tool is shown; `annotations` replaces the backend's object whole. */
const toolCuration = promptCuration.extend({
  annotations: z
    .strictObject({
      title: curatedText.optional(),
      readOnlyHint: z.boolean().optional(),
      destructiveHint: z.boolean().optional(),
      idempotentHint: z.boolean().optional(),
      openWorldHint: z.boolean().optional(),
    })
    .optional(),
})

/**
 * How the server's own `instructions` (server/discover, or a 2025-era `initialize` result) are
 * shown (docs/catalog.md §Curation): `text` in place of whatever the backend says, or `hidden`.
 */
const instructionsCuration = z.strictObject({
  text: curatedText.optional(),
  hidden: z.boolean().default(false),
})

/**
 * How a skill of the skills extension is shown (docs/catalog.md §Curation): hidden, with its files
 * and the skills nested in it. Its description is not replaced: a host checks a skill's
 * frontmatter against the bytes and digest of its SKILL.md (skills.mdx §Frontmatter Verification).
 */
const skillCuration = z.strictObject({
  /** Absent from skills/list and resources/list; skills/get and its files unknown. */
  hidden: z.boolean().default(false),
})

/**
 * What the endpoint's Server Card says and whether it is published (docs/operations.md §Server
 * Cards). The lengths are the card schema's (SEP-2127 extension schema: title, description).
 */
const endpointCard = z.strictObject({
  /** false: left out of /.well-known/ai-catalog.json, and its card is a 404 (unknown server). */
  listed: z.boolean().default(true),
  title: z.string().min(1).max(100).optional(),
  description: z.string().min(1).max(100).optional(),
  /** The card's `version` (default: the gateway's own); the card schema refuses ranges. */
  version: z
    .string()
    .min(1)
    .max(255)
    .refine((v) => !/^[\^~<>=]|(^|\.)[xX*](\.|$)/.test(v), 'a version, not a range (1.2.3)')
    .optional(),
  websiteUrl: url.optional(),
})

/** The events extension through this server (docs/events.md). */
const serverEvents = z.strictObject({
  /**
   * URL patterns (`*` wildcard) a client may have this backend POST events to (`events/subscribe`
   * webhooks); none: every callback is refused. Plain http and internal addresses pass only where
   * a pattern names the origin literally; link-local addresses never.
   */
  callbacks: z
    .array(
      z
        .string()
        .regex(
          /^(\*$|https?:\/\/)/,
          'expected "*" or a URL pattern starting with https:// or http://',
        ),
    )
    .default([]),
})

/** Backend names are the keys: non-empty (the load-time checks refuse invisible characters). */
const backendName = z.string().min(1, 'empty name')

/**
 * Run-time pinning (docs/catalog.md §Run-time pinning): definitions are compared with the digests
 * of `mcp-edge pin`'s lock file.
 */
const pinning = z.strictObject({
  /** The lock `mcp-edge pin` writes; relative to the config file. */
  lockFile: z.string().min(1).default('catalog.lock.yaml'),
  /** A definition whose digest differs from its pin: hidden and unknown to calls, or served and reported. */
  onDrift: z.enum(['hide', 'warn']).default('hide'),
  /** A definition the lock does not name: hidden (nobody reviewed it) or served. */
  newTools: z.enum(['hide', 'allow']).default('hide'),
})

/**
 * How the gateway's own reads (`mcp-edge pin`, `pin --check`, the run-time probe) present
 * themselves to a backend: as a client's request through the gateway does, so that a backend
 * cannot tell them apart and show them other text than clients get (docs/catalog.md §The
 * gateway's own reads). The defaults are what the official TypeScript SDK client sends from Node.
 */
const ownRequests = z.strictObject({
  /** `clientInfo` of the request envelope (2026-07-28) or of `initialize` (2025-era servers). */
  clientInfo: z
    .strictObject({ name: z.string().min(1), version: z.string().min(1) })
    .default({ name: 'claude-ai', version: '0.1.0' }),
  /** `clientCapabilities` likewise: a backend may list differently for what a client declares. */
  clientCapabilities: z.record(z.string(), z.unknown()).default({}),
  /** The client's own headers, forwarded as a client's are (load-time checks refuse owned names). */
  headers: z
    .record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'invalid header name'), z.string())
    .default({ 'accept-language': '*', 'sec-fetch-mode': 'cors', 'user-agent': 'node' }),
  /** The client address X-Forwarded-For names, as for a client connected from there. */
  address: z.union([z.ipv4(), z.ipv6()]).default('127.0.0.1'),
  /** X-Forwarded-Host: how clients name the gateway (default: auth.publicUrl's host, else localhost:<listen.port>). */
  host: z.string().min(1).optional(),
})

const server = z.strictObject({
  upstreams: z.array(upstream).min(1),
  /** true = this backend enforces HeaderMismatch (-32020) itself, so headers can be trusted. */
  trustHeaders: z.boolean().default(false),
  /** Whether 2025-era clients (no MCP-Protocol-Version 2026-07-28) are passed to this backend. */
  legacyClients: z.enum(['allow', 'reject']).default('allow'),
  /**
   * Methods beyond the protocol's that may reach this server when policies are on (patterns, `*`
   * wildcard); each is then a policy target (`methods:` in rules), denied unless a rule allows it.
   */
  extraMethods: patterns.default([]),
  /** Sent upstream on every request; the client's own credentials never are. */
  headers: z
    .record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'invalid header name'), z.string())
    .default({}),
  timeouts: timeouts.default(timeouts.parse({})),
  requiredScopes: z.array(scopeToken).default([]),
  /**
   * Scopes per target, by the backend's own names (patterns, `*` wildcard): a call needs
   * `requiredScopes` plus the scopes of every pattern its target matches (docs/auth.md §Scopes
   * per tool). Needs `auth:`.
   */
  scopes: targetScopes.default({}),
  /**
   * Lists under `scopes`: `hide` shows only what the token's scopes can call; `stepUp` lists what
   * policy allows, so a client learns of a tool and steps up when it calls it.
   */
  scopesInLists: z.enum(['hide', 'stepUp']).default('hide'),
  /**
   * OAuth clients (the token's `azp`, else `client_id`; patterns) whose tokens may use this
   * server at all; absent: any client (docs/auth.md §Client applications). Needs `auth:`.
   */
  clients: z.array(z.string().min(1)).min(1, 'name at least one client').optional(),
  origins: z.array(z.string().min(1)).optional(),
  balance: balance.default('least-request'),
  maxInFlight: z.int().min(1).default(256),
  /** Long-lived streams (listen, 2025-era GET) one replica may hold; apart from maxInFlight. */
  maxStreams: z.int().min(1).default(256),
  healthCheck: healthCheck.optional(),
  outlier: outlier.default(outlier.parse({})),
  routes: z.array(route).default([]),
  retry: retry.default(retry.parse({})),
  tokenExchange: tokenExchange.optional(),
  /** The user's own account at the service (docs/auth.md §Per-user credentials). */
  userAuth: userAuth.optional(),
  /** Curation of the backend's tools, keyed by its own names (docs/catalog.md §Curation). */
  tools: z.record(backendName, toolCuration).default({}),
  /** Curation of the backend's prompts, keyed by its own names. */
  prompts: z.record(backendName, promptCuration).default({}),
  /** Curation of the backend's `instructions`. */
  instructions: instructionsCuration.optional(),
  /** Curation of the backend's skills, keyed by the URI of their SKILL.md. */
  skills: z.record(backendName, skillCuration).default({}),
  /** The events extension: where webhooks may go (docs/events.md). */
  events: serverEvents.default(serverEvents.parse({})),
  /** Its Server Card (docs/operations.md §Server Cards). */
  card: endpointCard.default(endpointCard.parse({})),
})

/**
 * One endpoint over several servers (docs/virtual-servers.md). Names become `<member>_<name>` where
 * `prefix` says so; `resources` routes a URI (pattern, `*` wildcard) two members both serve.
 */
const virtualServer = z.strictObject({
  members: z.array(z.string().min(1)).min(1, 'at least one member is required'),
  prefix: z.enum(['never', 'onCollision', 'always']).default('onCollision'),
  /**
   * How long the member reads of one request may take, all of them together (a list's pages, a
   * refresh to route a name); members not done by then are left out of that answer.
   */
  fanOutTimeoutMs: positiveMs.default(2000),
  resources: z.record(z.string().min(1), z.string().min(1)).default({}),
  /** Its Server Card (docs/operations.md §Server Cards). */
  card: endpointCard.default(endpointCard.parse({})),
})

const jwt = z.strictObject({
  issuer: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
  audience: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
  jwksUrl: url.optional(),
  jwksFile: z.string().min(1).optional(),
  publicKeyFile: z.string().min(1).optional(),
  algorithms: z
    .array(
      z.enum([
        'RS256',
        'RS384',
        'RS512',
        'PS256',
        'PS384',
        'PS512',
        'ES256',
        'ES384',
        'ES512',
        'EdDSA',
      ]),
    )
    .min(1)
    .default(['RS256', 'ES256', 'EdDSA']),
  clockToleranceSec: z.int().min(0).max(300).default(30),
  jwksCooldownMs: nonNegativeMs.default(30_000),
  jwksCacheMaxAgeMs: positiveMs.default(600_000),
  jwksTimeoutMs: positiveMs.default(5000),
  /** How long a verified token is remembered (never past its exp); 0 verifies every request. */
  verifiedCacheMs: nonNegativeMs.max(300_000).default(60_000),
  verifiedCacheSize: z.int().min(1).default(10_000),
})

const auth = z
  .strictObject({
    /** How clients reach the gateway (scheme://host[:port]), used for audiences and metadata URLs. */
    publicUrl: url,
    /** JWT access tokens; absent: every token is introspected (`introspection`). */
    jwt: jwt.optional(),
    /** Opaque tokens, RFC 7662 (docs/auth.md §Opaque tokens). */
    introspection: introspection.optional(),
    resourceMetadata: z
      .strictObject({
        authorizationServers: z.array(url).min(1),
        scopesSupported: z.array(scopeToken).optional(),
      })
      .optional(),
  })
  .refine((a) => a.jwt !== undefined || a.introspection !== undefined, {
    message: 'set jwt, introspection, or both',
  })

const cache = z.strictObject({
  maxBytes: z
    .int()
    .positive()
    .default(64 * 1024 * 1024),
  maxEntryBytes: z
    .int()
    .positive()
    .default(1024 * 1024),
  maxTtlMs: positiveMs.default(300_000),
  private: z.boolean().default(false),
  staleIfErrorMs: nonNegativeMs.default(0),
  redis: z
    .string()
    .regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL')
    .optional(),
})

const limits = z.strictObject({
  maxBodyBytes: z
    .int()
    .positive()
    .default(1024 * 1024),
  maxHeaderCount: z.int().positive().default(100),
  maxHeaderBytes: z
    .int()
    .positive()
    .default(16 * 1024),
  headersTimeoutMs: positiveMs.default(10_000),
  bodyTimeoutMs: positiveMs.default(30_000),
  maxJsonDepth: z.int().min(2).max(1000).default(64),
  maxTokenBytes: z.int().positive().default(8192),
  /** Largest upstream answer the gateway will parse to filter or cache (larger ones get 502). */
  maxInspectBytes: z
    .int()
    .positive()
    .default(8 * 1024 * 1024),
  /** Open long-lived streams per caller (issuer + subject, else client address), all servers. */
  maxStreamsPerPrincipal: z.int().min(1).default(20),
})

/**
 * OpenTelemetry traces (docs/operations.md "Traces"): absent = off, and the request path then has
 * no tracing stage at all. `endpoint` is the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
 * is: the gateway appends `/v1/traces` (OTLP/HTTP, OTLP spec §OTLP/HTTP Request).
 */
const telemetry = z.strictObject({
  otlp: z.strictObject({
    endpoint: url,
    /** Sent with every export (a collector API key …); `${ENV}` references are substituted. */
    headers: z.record(z.string().min(1), z.string()).default({}),
  }),
  /** Share of new traces sampled (a sampled parent is always followed: parent-based sampler). */
  sampleRatio: z.number().min(0).max(1).default(1),
  serviceName: z.string().min(1).default('mcp-edge'),
  /**
   * Pass the client's W3C `baggage` on to backends (re-encoded by the W3C propagator). Off: it is
   * dropped at the edge, since a backend may read identity from it (docs/operations.md).
   */
  propagateBaggage: z.boolean().default(false),
})

/**
 * Server Cards and the AI Catalog (docs/operations.md §Server Cards). Served only where the gateway
 * knows its public URL: `auth.publicUrl`, or `publicUrl` here when there is no `auth:`.
 */
const cards = z.strictObject({
  enabled: z.boolean().default(true),
  /** How clients reach the gateway, for a gateway without `auth:` (with it, auth.publicUrl is). */
  publicUrl: url.optional(),
  /** Namespace of the cards' reverse-DNS `name` (default: the public host, reversed). */
  namespace: z
    .string()
    .regex(/^[a-zA-Z0-9.-]+$/, 'expected a reverse-DNS namespace (a-z A-Z 0-9 . -)')
    .optional(),
  /** Cache-Control max-age of cards and catalog; a hidden endpoint vanishes from caches this late. */
  maxAgeSec: z.int().min(0).max(86_400).default(300),
})

/** Rate limits' storage (the limits themselves are in the policy files; docs/rate-limits.md). */
const rateLimits = z.strictObject({
  /** Shared by every gateway replica; `cache` = the URL of `cache.redis`. Unset: per replica. */
  redis: z
    .union([
      z.literal('cache'),
      z.string().regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL, or "cache"'),
    ])
    .optional(),
  /**
   * How long a decision waits for Redis before the replica decides locally (docs/rate-limits.md
   * §Several replicas): every limited request may wait this long while Redis is slow.
   */
  commandTimeoutMs: z.int().min(1).max(5_000).default(100),
  /** Gateway replicas: local limits (no Redis, or Redis down) each hold this share of a limit. */
  replicas: z.int().min(1).max(10_000).default(1),
  /**
   * Memory the per-replica buckets may take, shared equally by the limits (128 bytes a bucket);
   * also each limit's bucket count in Redis. A full table refuses new keys (docs/rate-limits.md).
   */
  memoryBytes: z
    .int()
    .positive()
    .default(16 * 1024 * 1024),
})

/**
 * The audit log's call arguments (docs/operations.md "Audit log"). `none` writes none; `redacted`
 * replaces values under credential-like names (built in, plus `keys`), at `paths`, and credential
 * shapes in any string by a marker with a keyed hash; `full` writes them as sent. Both are cut to
 * `maxArgumentBytes` (UTF-8 bytes of JSON) per line.
 */
const audit = z.strictObject({
  arguments: z.enum(['none', 'redacted', 'full']).default('none'),
  maxArgumentBytes: z
    .int()
    .min(64)
    .max(1024 * 1024)
    .default(4096),
  redaction: z
    .strictObject({
      /** `$.credentials.secret`, `$.cards[*].pan` (config/redact-paths.ts). */
      paths: z
        .array(
          z.string().superRefine((path, ctx) => {
            const parsed = parseRedactPath(path)
            if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed })
          }),
        )
        .default([]),
      /** Member names (case-insensitive, `*` any run) redacted in addition to the built-in ones. */
      keys: patterns.default([]),
      /**
       * Key of the redaction hash, as an env reference (`${MCP_EDGE_AUDIT_HASH_KEY}`). Unset: a
       * random key per process, so markers correlate only within one process.
       */
      hashKey: z.string().min(16, 'use at least 16 characters').optional(),
    })
    .default({ paths: [], keys: [] }),
})

export const configSchema = z.strictObject({
  listen: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1'),
      port: z.int().min(0).max(65535).default(8080),
    })
    .default({ host: '127.0.0.1', port: 8080 }),
  /** Allowed `Origin` values for every server; a request without Origin is always allowed. */
  origins: z.array(z.string().min(1)).default([]),
  /** When set, `Host` must be one of these (DNS-rebinding guard for local deployments). */
  allowedHosts: z.array(z.string().min(1)).optional(),
  limits: limits.default(limits.parse({})),
  log: z
    .strictObject({
      level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
    })
    .default({ level: 'info' }),
  /**
   * The admin listener (docs/operations.md §Status page): /metrics (Prometheus), /readyz with its
   * details, the status page and status.json; never on the data-plane port.
   */
  admin: z
    .strictObject({
      host: z.string().default('127.0.0.1'),
      port: z.int().min(0).max(65535),
      /**
       * Required, when set, for the status page, status.json and /readyz (admin), as a bearer
       * token or a session of the page's sign-in; a reload that changes it ends every session.
       * Give it as an env reference (`${MCP_EDGE_ADMIN_TOKEN}`).
       */
      token: z.string().min(16, 'use at least 16 characters').optional(),
      /** Show callers' issuer and subject on the status page instead of a short hash of them. */
      showSubjects: z.boolean().default(false),
    })
    .optional(),
  shutdown: z.strictObject({ drainMs: nonNegativeMs.default(30_000) }).default({ drainMs: 30_000 }),
  telemetry: telemetry.optional(),
  /**
   * Worker processes sharing the listen port (node:cluster): a number, or `auto` for one per core
   * the process may use. 1 (the default) is a single process with no primary (docs/operations.md).
   */
  workers: z.union([z.literal('auto'), z.int().min(1).max(256)]).default(1),
  policies: z.string().min(1).optional(),
  policyMode: z.enum(['enforce', 'dry-run']).default('enforce'),
  auth: auth.optional(),
  cards: cards.default(cards.parse({})),
  cache: cache.optional(),
  rateLimits: rateLimits.optional(),
  /** Proxies (CIDRs) whose X-Forwarded-For is believed for `key: ip` limits. */
  trustedProxies: z
    .array(z.string().refine((s) => parseCidr(s) !== undefined, 'expected an IP address or CIDR'))
    .default([]),
  pinning: pinning.optional(),
  ownRequests: ownRequests.default(ownRequests.parse({})),
  legacySessions: z
    .strictObject({ key: z.string().min(16, 'use at least 16 characters') })
    .optional(),
  audit: audit.default(audit.parse({})),
  /** Per-user tokens of `servers.<name>.userAuth`: key, store, connect sign-in. */
  userTokens: userTokens.optional(),
  servers: z
    .record(z.string().regex(/^[A-Za-z0-9._-]+$/, 'server names are [A-Za-z0-9._-]+'), server)
    .refine((s) => Object.keys(s).length > 0, 'at least one server is required'),
  virtualServers: z
    .record(
      z.string().regex(/^[A-Za-z0-9._-]+$/, 'server names are [A-Za-z0-9._-]+'),
      virtualServer,
    )
    .default({}),
})

export type GatewayConfig = z.infer<typeof configSchema>
export type ServerConfig = z.infer<typeof server>
export type AuthConfig = z.infer<typeof auth>
export type JwtConfig = z.infer<typeof jwt>
export type CacheConfig = z.infer<typeof cache>
export type PinningConfig = z.infer<typeof pinning>
export type VirtualServerConfig = z.infer<typeof virtualServer>
export type EndpointCardConfig = z.infer<typeof endpointCard>
