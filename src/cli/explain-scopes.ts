import type { GatewayConfig } from '../config/schema.js'
import { ScopeGate } from '../auth/scopes.js'
import type { McpTarget } from '../mcp/classify.js'

/**
 * The scopes part of `mcp-edge explain` (docs/auth.md §Scopes per tool): what a call of the
 * target needs through the endpoint named, and, with `--scopes`, what the token lacks. The
 * gateway checks this before policy and answers a lack with 403 `insufficient_scope`.
 */
export interface ScopeExplanation {
  /** Every scope the call needs, in the order the 403 challenge names them. */
  readonly needed: readonly string[]
  /** `--scopes`, or undefined when not given (then nothing is checked). */
  readonly held: readonly string[] | undefined
  /** What `held` lacks; empty when it lacks nothing or was not given. */
  readonly missing: readonly string[]
  /** The explain line. */
  readonly line: string
}

/** `--scopes "a b"` as the verifier reads a token's `scope` (space-separated, empties dropped). */
export function parseScopes(text: string | undefined): ReadonlySet<string> | undefined {
  return text === undefined ? undefined : new Set(text.split(' ').filter((s) => s !== ''))
}

/**
 * What calling `target` of `server` through `endpoint` (the server itself, or a virtual server it
 * is a member of) needs: the endpoint's `requiredScopes` (a virtual server's: every member's),
 * the server's, then those of every `scopes:` pattern the target matches, as the runtime's
 * challenge lists them (auth/scopes.ts). Undefined when nothing is needed and nothing was given.
 */
export function explainScopes(
  config: GatewayConfig,
  endpoint: string,
  server: string,
  target: McpTarget,
  held: ReadonlySet<string> | undefined,
): ScopeExplanation | undefined {
  const members = config.virtualServers[endpoint]?.members ?? [endpoint]
  const required = members.flatMap((m) => config.servers[m]?.requiredScopes ?? [])
  const own =
    ScopeGate.offline(config)?.needs(server, target) ?? config.servers[server]?.requiredScopes
  const needed = [...new Set([...required, ...(own ?? [])])]
  if (needed.length === 0 && held === undefined) return undefined
  const missing = held === undefined ? [] : needed.filter((s) => !held.has(s))
  const quoted = (xs: readonly string[]): string => JSON.stringify(xs.join(' '))
  const line =
    held === undefined
      ? `scopes: needs ${quoted(needed)} (not checked: no --scopes)`
      : `scopes: needs ${quoted(needed)}; the token has ${quoted([...held])}; ${
          missing.length === 0 ? 'none missing' : `missing ${quoted(missing)}`
        }`
  return { needed, held: held === undefined ? undefined : [...held], missing, line }
}
