import { isRecord } from '../mcp/jsonrpc.js'

/**
 * Where a 2026-07-28 result names the server that sent it (spec 2026-07-28 basic/index §_meta:
 * `io.modelcontextprotocol/serverInfo` in a result's `_meta`). A `server/discover` result has no
 * `serverInfo` member of its own (spec 2026-07-28 server/discover); the v2 SDK client reads the
 * identity from this key only, as the SDK servers write it.
 */
export const SERVER_INFO_META = 'io.modelcontextprotocol/serverInfo'
/** A partial answer (a member left out) is fresh this long, and never cached as complete. */
const PARTIAL_TTL_MS = 5000

/** Cache hints of a merged answer (caching.mdx §ttlMs, §cacheScope). */
export interface MergedHints {
  readonly ttlMs: number
  readonly cacheScope: 'public' | 'private'
}

/**
 * The merged answer may be fresh no longer than any contributor's, and is private when any
 * contributor's is (or when the caller's view depends on who it is): an aggregate never widens
 * what a member allowed. A missing ttlMs counts as 0, a missing scope as private (caching.mdx).
 */
export function mergeHints(
  results: readonly Readonly<Record<string, unknown>>[],
  identityDependent: boolean,
  partial: boolean,
): MergedHints {
  let ttlMs = partial ? PARTIAL_TTL_MS : Number.POSITIVE_INFINITY
  let scope: 'public' | 'private' = identityDependent ? 'private' : 'public'
  for (const r of results) {
    const t = typeof r.ttlMs === 'number' && r.ttlMs > 0 ? r.ttlMs : 0
    ttlMs = Math.min(ttlMs, t)
    if (r.cacheScope !== 'public') scope = 'private'
  }
  return { ttlMs: Number.isFinite(ttlMs) ? Math.floor(ttlMs) : 0, cacheScope: scope }
}

/** The skills extension's identifier under `capabilities.extensions` (skills.mdx). */
const SKILLS_EXTENSION = 'io.modelcontextprotocol/skills'

/**
 * Capabilities of the whole: a capability any member has, with its sub-flags OR-ed (`listChanged`
 * when any member sends it). Unknown capability objects are merged key by key, first member wins;
 * an extension under `extensions` (MCP Apps' `io.modelcontextprotocol/ui` among them) is passed
 * through as the first member that declares it does. The skills extension's `directoryRead` is
 * the members' that declare the extension all together: a client calls
 * `resources/directory/read` only when it is declared (skills.mdx §Capability Negotiation), and
 * each directory read reaches the one member that serves the directory.
 */
export function mergeCapabilities(
  results: readonly Readonly<Record<string, unknown>>[],
): Record<string, unknown> {
  const out: Record<string, Record<string, unknown>> = {}
  let skills = 0
  let directories = 0
  for (const r of results) {
    if (!isRecord(r.capabilities)) continue
    for (const [name, value] of Object.entries(r.capabilities)) {
      if (!isRecord(value)) continue
      const into = (out[name] ??= {})
      for (const [k, v] of Object.entries(value)) {
        if (v === true) into[k] = true
        else if (!(k in into)) into[k] = v
      }
    }
    const declared = isRecord(r.capabilities.extensions)
      ? r.capabilities.extensions[SKILLS_EXTENSION]
      : undefined
    if (isRecord(declared)) {
      skills++
      if (declared.directoryRead === true) directories++
    }
  }
  const extensions = out.extensions
  if (extensions !== undefined && skills > 0)
    extensions[SKILLS_EXTENSION] = directories === skills ? { directoryRead: true } : {}
  return out
}

/** The instructions of each member that gave some, each under its member's name. */
export function mergeInstructions(
  named: readonly (readonly [string, Readonly<Record<string, unknown>>])[],
): string | undefined {
  const parts = named.flatMap(([member, r]) =>
    typeof r.instructions === 'string' && r.instructions !== ''
      ? [`[${member}] ${r.instructions}`]
      : [],
  )
  return parts.length === 0 ? undefined : parts.join('\n\n')
}
