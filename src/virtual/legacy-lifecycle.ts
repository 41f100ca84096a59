import { isRecord } from '../mcp/jsonrpc.js'
import { LEGACY_VERSION, OFFERED_LEGACY_VERSIONS } from '../mcp/protocol.js'

/**
 * The version to answer `initialize` with: the client's own when the gateway speaks it, else the
 * newest it does (spec 2025-11-25 basic/lifecycle §Version Negotiation: "the server MUST respond
 * with another protocol version it supports", the client disconnects if it cannot use it).
 */
export function negotiateVersion(requested: unknown): string {
  return typeof requested === 'string' && OFFERED_LEGACY_VERSIONS.includes(requested)
    ? requested
    : LEGACY_VERSION
}

/**
 * The capabilities a 2025-era client of a virtual server is told about: the members' merged
 * capabilities, less what the gateway does not offer on that era. `listChanged` stays: the
 * members' change notifications reach the client on its GET stream (virtual/listen.ts
 * legacyListen), for the kinds some member advertises. `resources.subscribe` goes: the gateway
 * keeps no per-session subscriptions (any replica must serve the session from its id alone), so
 * `resources/subscribe` is not offered (docs/virtual-servers.md "2025-era clients"). `tasks` stays:
 * task ids name their member and follow-ups are routed to it (docs/virtual-servers.md "Tasks").
 */
export function legacyCapabilities(
  merged: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(merged)) {
    if (k === 'subscriptions') continue
    if ((k === 'tools' || k === 'prompts' || k === 'resources') && isRecord(v)) {
      const { subscribe: _s, ...rest } = v
      out[k] = rest
    } else out[k] = v
  }
  return out
}

/** The `initialize` result (spec 2025-11-25 basic/lifecycle §Initialization). */
export function initializeAnswer(
  rawId: string,
  version: string,
  capabilities: Readonly<Record<string, unknown>>,
  serverInfo: Readonly<Record<string, unknown>>,
  instructions: string | undefined,
): string {
  const result = {
    protocolVersion: version,
    capabilities,
    serverInfo,
    ...(instructions !== undefined && { instructions }),
  }
  return `{"jsonrpc":"2.0","id":${rawId},"result":${JSON.stringify(result)}}`
}

/** `ping` is answered by the receiver with an empty result (spec 2025-11-25 basic/utilities/ping). */
export function pingAnswer(rawId: string): string {
  return `{"jsonrpc":"2.0","id":${rawId},"result":{}}`
}
