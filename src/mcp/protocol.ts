import { readFileSync } from 'node:fs'
import { isRecord } from './jsonrpc.js'

/**
 * The protocol revisions the gateway speaks and the identity it gives itself: one place, so that
 * what a client is told, what a backend is asked with and what a card advertises cannot drift.
 */

/** The revision whose clients mirror method and name into headers (SEP-2243), sessionless. */
export const MODERN_VERSION = '2026-07-28'
/**
 * The `supportedVersions` of the gateway's own discovery answers (a virtual server's, and a
 * 2025-only member's as the gateway presents it to a virtual server): the modern revision only,
 * since a 2025-era client negotiates in `initialize` instead (spec 2026-07-28 server/discover).
 */
export const MODERN_VERSIONS: readonly string[] = [MODERN_VERSION]
/**
 * The newest 2025-era revision: what the gateway asks a 2025-only backend for when no client
 * version says otherwise, and what a card lists next to the modern one.
 */
export const LEGACY_VERSION = '2025-11-25'
/**
 * 2025-era revisions a virtual server offers its clients, newest first. The gateway answers
 * `initialize` itself (spec 2025-11-25 basic/lifecycle §Initialization), so it offers the
 * revisions it can translate every member to; 2024-era revisions had no Streamable HTTP.
 */
export const OFFERED_LEGACY_VERSIONS: readonly string[] = [
  LEGACY_VERSION,
  '2025-06-18',
  '2025-03-26',
]
/** 2025-era revisions: no request-metadata headers, so their headers are never trusted. */
export const LEGACY_VERSIONS: ReadonlySet<string> = new Set([
  ...OFFERED_LEGACY_VERSIONS,
  '2024-11-05',
  '2024-10-07',
])

/** An MCP `Implementation`: the `serverInfo` or `clientInfo` a party names itself with. */
type Implementation = Readonly<{ name: string; version: string }>

/**
 * The gateway's own identity: a virtual server's `serverInfo` (its discovery and 2025-era
 * `initialize`) and the `clientInfo` of the requests it makes on its own behalf. Read once from
 * package.json, two folders up from src/mcp/ and from dist/mcp/ alike (tsconfig.build.json: rootDir
 * src, outDir dist); the container image keeps package.json beside dist/ (deploy/Dockerfile).
 */
export const GATEWAY_INFO: Implementation = Object.freeze(readIdentity())

function readIdentity(): Implementation {
  const fallback = { name: 'mcp-edge', version: 'unknown' }
  try {
    const pkg: unknown = JSON.parse(
      readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
    )
    if (!isRecord(pkg)) return fallback
    return {
      name: typeof pkg.name === 'string' ? pkg.name : fallback.name,
      version: typeof pkg.version === 'string' ? pkg.version : fallback.version,
    }
  } catch {
    return fallback
  }
}
