import { z } from 'zod'

/**
 * The config of per-user upstream authorization (`servers.<name>.userAuth`, `userTokens`) and of
 * opaque-token introspection (`auth.introspection`): docs/auth.md §Per-user credentials and
 * §Opaque tokens. Part of the gateway's schema (config/schema.ts); defaults live here.
 */

const url = z.url({ protocol: /^https?$/, error: 'invalid URL (http or https expected)' })
const positiveMs = z.int().positive()
/** RFC 6749 §3.3 scope-token. */
const scopeToken = z
  .string()
  .regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'invalid scope (RFC 6749 scope-token)')
const redisUrl = z.string().regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL')

/**
 * The user's own account at the service behind one server: the gateway is an OAuth client of the
 * service's authorization server (RFC 6749 authorization code with PKCE, RFC 7636) and sends the
 * user's token upstream in place of the caller's (spec 2026-07-28 client/elicitation §URL Mode
 * Elicitation for OAuth Flows).
 */
export const userAuth = z
  .strictObject({
    /** The service's authorization server: its RFC 8414 / OIDC metadata names the endpoints. */
    issuer: url.optional(),
    /** Instead of (or over) the issuer's metadata. */
    authorizationEndpoint: url.optional(),
    tokenEndpoint: url.optional(),
    /** RFC 7009; default: the metadata's `revocation_endpoint`, if any. */
    revocationEndpoint: url.optional(),
    clientId: z.string().min(1),
    /** Omitted: a public client (PKCE only). */
    clientSecret: z.string().min(1).optional(),
    /** How the gateway authenticates at the token endpoint (RFC 6749 §2.3.1). */
    clientAuth: z.enum(['basic', 'post']).default('basic'),
    scopes: z.array(scopeToken).default([]),
    /** RFC 8707 `resource`; default: the server's first upstream URL. */
    resource: url.optional(),
    /** The service's name in the connect prompt and page (default: the server's name). */
    title: z.string().min(1).max(100).optional(),
    /** Each request to the service's authorization server, body included. */
    timeoutMs: positiveMs.default(5000),
    /** A token this close to its `expires_in` is refreshed before it is sent. */
    refreshBeforeMs: z.int().min(0).default(60_000),
  })
  .refine(
    (u) =>
      u.issuer !== undefined ||
      (u.authorizationEndpoint !== undefined && u.tokenEndpoint !== undefined),
    'set issuer, or authorizationEndpoint and tokenEndpoint',
  )

/** Where per-user tokens are kept, and how the connect page signs the user in. */
export const userTokens = z.strictObject({
  /**
   * 32 random bytes, standard base64 (`openssl rand -base64 32`), as an env reference: tokens
   * are encrypted with it at rest (AES-256-GCM), and the connect links sealed.
   */
  key: z.string().refine((k) => keyBytes(k) === 32, 'expected 32 bytes in standard base64'),
  /** Shared by every gateway replica; `cache` = the URL of `cache.redis`. Unset: in memory. */
  redis: z.union([z.literal('cache'), redisUrl]).optional(),
  /** The connect page's sign-in at the gateway's own issuer (OpenID Connect, code + PKCE). */
  login: z.strictObject({
    clientId: z.string().min(1),
    /** Omitted: a public client (PKCE only). */
    clientSecret: z.string().min(1).optional(),
  }),
  /**
   * How long a retry whose user accepted the connect prompt waits for the connect page to finish
   * before it asks again (spec 2026-07-28 client/elicitation §URL Mode Flow); 0: asks at once.
   */
  connectWaitMs: z.int().min(0).max(120_000).default(30_000),
  /** Connected users kept by the in-memory store (least recently used dropped first). */
  maxEntries: z.int().min(1).default(100_000),
})

/** RFC 7662: tokens that are not JWTs (or every token, without `auth.jwt`) are introspected. */
export const introspection = z.strictObject({
  /** Default: `introspection_endpoint` of the (single) issuer's metadata. */
  url: url.optional(),
  clientId: z.string().min(1),
  clientSecret: z.string().min(1),
  clientAuth: z.enum(['basic', 'post']).default('basic'),
  /**
   * The `iss` an answer must name, or that an answer without `iss` is taken from (default: the
   * single `auth.jwt.issuer`).
   */
  issuer: z.string().min(1).optional(),
  /**
   * The `aud` values accepted without `auth.jwt` (with it, `auth.jwt.audience` applies to both);
   * default: each server's own URL, as for JWTs.
   */
  audience: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
  /** An active answer is reused at most this long, and never past its `exp`. */
  cacheMs: z.int().min(0).max(300_000).default(60_000),
  cacheSize: z.int().min(1).default(10_000),
  timeoutMs: positiveMs.default(5000),
})

function keyBytes(text: string): number {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return -1
  return Buffer.from(text, 'base64').length
}

export type UserAuthConfig = z.infer<typeof userAuth>
export type IntrospectionConfig = z.infer<typeof introspection>
