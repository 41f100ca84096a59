import { HOP_BY_HOP } from './headers.js'

/**
 * Which request headers belong to the gateway rather than to the client: the ones it never
 * forwards, the ones it reads to judge a request, and the ones it sets upstream. docs/security.md
 * ("What the gateway owns on the way in") is the operator-facing list; keep the two in step.
 */

// SECURITY: never forwarded from the client: credentials (the spec forbids token passthrough,
// spec 2026-07-28 basic/authorization §Token Handling), identity headers the gateway sets itself,
// and framing the gateway re-derives for the upstream connection. `x-forwarded-*` as a whole is
// also dropped (isForwardedFamily). W3C `baggage` is the client's text, which a backend may take
// for identity (a `user.id` entry): only the gateway's own propagation sends one, and only with
// `telemetry.propagateBaggage` (telemetry/tracing.ts).
const NOT_FORWARDED: readonly string[] = [
  ...HOP_BY_HOP,
  'authorization',
  'cookie',
  'host',
  'content-length',
  'accept-encoding',
  'forwarded',
  'x-real-ip',
  'expect',
  'baggage',
]

// SECURITY: headers the gateway reads to judge a request or sets upstream. Naming one of them in
// `Connection` would make it hop-by-hop (RFC 9110 §7.6.1): judged here, missing at the backend.
// `mcp-*` (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*, Mcp-Session-Id) and
// `x-forwarded-*` are owned by prefix (isOwnedName).
const OWNED: ReadonlySet<string> = new Set([
  'content-type',
  'content-length',
  'content-encoding',
  'transfer-encoding',
  'host',
  'authorization',
  'origin',
  'forwarded',
  'x-real-ip',
])

/** The identity headers proxy.ts sets on every forwarded request. */
const SET_BY_GATEWAY: readonly string[] = [
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
]

// SECURITY: names a configured upstream header may not take: the gateway judges them, derives
// them for the upstream connection, or sets them itself. A configured `Mcp-Method` would replace
// the one the gateway judged.
const NOT_CONFIGURABLE: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP,
  ...SET_BY_GATEWAY,
  'content-type',
  'content-length',
  'content-encoding',
  'host',
  'expect',
])

/** Per-server header rules, compiled once per config (runtime.ts); nothing here is built per request. */
export interface HeaderRules {
  /** Lower-case names of client headers never forwarded, including every name configured upstream. */
  readonly dropped: ReadonlySet<string>
  /** Lower-case names, beyond the ones every server owns, that `Connection` may not name. */
  readonly owned: ReadonlySet<string>
}

/** Rules of a server that sets no header of its own (and of requests for an unknown server). */
export const DEFAULT_HEADER_RULES: HeaderRules = compileHeaderRules([], undefined)

/**
 * Rules for one server: `configured` are the names under `servers.<name>.headers` (any case),
 * `hashHeader` the lower-case name `balance: {hash: "header:…"}` reads, if any.
 */
export function compileHeaderRules(
  configured: readonly string[],
  hashHeader: string | undefined,
): HeaderRules {
  const names = configured.map((n) => n.toLowerCase())
  return {
    // SECURITY: a configured header replaces every client copy, whatever its case; it is never
    // appended to one (a backend would read `attacker, secret` or pick either).
    dropped: new Set([...NOT_FORWARDED, ...names]),
    owned: new Set(hashHeader === undefined ? names : [...names, hashHeader]),
  }
}

/** True for a client header of the `x-forwarded-*` family, which the gateway owns as a whole. */
export function isForwardedFamily(name: string): boolean {
  return name.startsWith('x-forwarded-')
}

/** True when `name` (lower-case) is a header the gateway reads, owns or sets for this server. */
export function isOwnedName(name: string, rules: HeaderRules): boolean {
  return (
    name.startsWith('mcp-') || isForwardedFamily(name) || OWNED.has(name) || rules.owned.has(name)
  )
}

/**
 * True when `name` (lower-case, with `_`) reads as a header the gateway owns or drops once `_` is
 * taken for `-`, as CGI-style stacks do (both become `HTTP_MCP_METHOD`): forwarded, it could stand
 * in for the judged or the configured value there.
 */
export function isUnderscoreTwin(name: string, rules: HeaderRules): boolean {
  const dashed = name.replaceAll('_', '-')
  return rules.dropped.has(dashed) || isOwnedName(dashed, rules)
}

/** Config problems of `servers.<server>.headers`, as `path: message` lines. */
export function upstreamHeaderProblems(
  server: string,
  headers: Readonly<Record<string, string>>,
): string[] {
  const problems: string[] = []
  const seen = new Set<string>()
  for (const name of Object.keys(headers)) {
    const lower = name.toLowerCase()
    const path = `servers.${server}.headers.${name}`
    if (seen.has(lower)) problems.push(`${path}: set twice (header names are case-insensitive)`)
    seen.add(lower)
    if (lower.startsWith('mcp-') || NOT_CONFIGURABLE.has(lower)) {
      problems.push(`${path}: the gateway owns this header and cannot send a configured value`)
    }
  }
  return problems
}
