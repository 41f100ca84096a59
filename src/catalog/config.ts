import { readFileSync } from 'node:fs'
import { isAbsolute, resolve } from 'node:path'
import type { GatewayConfig } from '../config/schema.js'
import type { OwnIdentity } from '../client/ask.js'
import { hasForbiddenNameCharacter, printable, uriProblem } from '../mcp/names.js'
import { DEFAULT_HEADER_RULES, isOwnedName } from '../mcp/owned-headers.js'
import { parseLock, type CatalogLock } from './lock.js'

/**
 * The lock each loaded config was read with. The config object is the snapshot's identity (it is
 * frozen and replaced whole on reload), so the lock travels with it the way the policy set does
 * with LoadedConfig, without another argument through every caller of createRuntime.
 */
const locks = new WeakMap<GatewayConfig, CatalogLock>()

/** Where `pinning.lockFile` points: relative paths are relative to the config file's folder. */
export function lockPath(config: GatewayConfig, dir: string): string | undefined {
  const file = config.pinning?.lockFile
  if (file === undefined) return undefined
  return isAbsolute(file) ? file : resolve(dir, file)
}

/**
 * Reads the lock of a config with `pinning:` (at startup and on every reload: a broken or missing
 * lock is a config problem like any other, so the previous config keeps running). Returns the
 * problems; on success the lock is remembered for `lockOf`.
 */
export function loadLockFor(config: GatewayConfig, dir: string): string[] {
  const path = lockPath(config, dir)
  if (path === undefined) return []
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    return [`pinning.lockFile: ${(err as Error).message} (write it with mcp-edge pin)`]
  }
  try {
    locks.set(config, parseLock(text, config.pinning?.lockFile ?? path))
    return []
  } catch (err) {
    return [`pinning.lockFile: ${(err as Error).message}`]
  }
}

/** The lock loaded with this config (loadLockFor), if any. */
export function lockOf(config: GatewayConfig): CatalogLock | undefined {
  return locks.get(config)
}

/**
 * What the schema cannot see about curation (docs/catalog.md §Curation): two definitions of one
 * server shown under one name, backend names a reader could see differently, a hidden definition
 * or instructions also curated; and own-read headers the gateway sets itself.
 */
export function curationProblems(config: GatewayConfig): string[] {
  const problems: string[] = [...ownHeaderProblems(config.ownRequests.headers)]
  for (const [server, s] of Object.entries(config.servers)) {
    if (s.instructions?.hidden === true && s.instructions.text !== undefined)
      problems.push(`servers.${server}.instructions: hidden, so nothing else may be set`)
    for (const uri of Object.keys(s.skills)) {
      // SECURITY: a key that is no normal URI names a skill no request can be matched against.
      const problem = uriProblem(uri)
      if (problem !== undefined || !uri.includes('://'))
        problems.push(
          `servers.${server}.skills.${printable(uri)}: not a SKILL.md URI (${problem ?? 'no scheme'})`,
        )
    }
    for (const kind of ['tools', 'prompts'] as const) {
      const at = `servers.${server}.${kind}`
      const shownBy = new Map<string, string>()
      for (const [backend, c] of Object.entries(s[kind])) {
        // SECURITY: a key with controls or bidi characters matches a name nobody can read.
        if (hasForbiddenNameCharacter(backend))
          problems.push(`${at}.${printable(backend)}: the name has a control or bidi character`)
        if (c.hidden) {
          if (Object.keys(c).some((k) => k !== 'hidden'))
            problems.push(`${at}.${backend}: hidden, so nothing else may be set`)
          continue
        }
        const shown = c.name ?? backend
        const other = shownBy.get(shown)
        if (other !== undefined)
          problems.push(`${at}.${backend}: shown as ${shown}, which ${other} is shown as too`)
        else shownBy.set(shown, backend)
      }
    }
  }
  return problems
}

/**
 * SECURITY: the headers an own read carries as its client's may not name what the gateway
 * judges, derives or sets (mcp/owned-headers.ts), nor `accept`, which every own read sets as a
 * client does: a second copy would make the request one no client sends.
 */
function ownHeaderProblems(headers: Readonly<Record<string, string>>): string[] {
  const problems: string[] = []
  const seen = new Set<string>()
  for (const name of Object.keys(headers)) {
    const lower = name.toLowerCase()
    const at = `ownRequests.headers.${name}`
    if (seen.has(lower)) problems.push(`${at}: set twice (header names are case-insensitive)`)
    seen.add(lower)
    if (lower === 'accept' || DEFAULT_HEADER_RULES.dropped.has(lower))
      problems.push(`${at}: the gateway sets or drops this header on every request`)
    else if (isOwnedName(lower, DEFAULT_HEADER_RULES))
      problems.push(`${at}: the gateway owns this header and cannot send a configured value`)
  }
  return problems
}

const identities = new WeakMap<GatewayConfig, OwnIdentity>()

/**
 * How the gateway's own reads present themselves under `config` (config `ownRequests`; docs/
 * catalog.md §The gateway's own reads), compiled once per loaded config.
 */
export function ownIdentity(config: GatewayConfig): OwnIdentity {
  const known = identities.get(config)
  if (known !== undefined) return known
  const o = config.ownRequests
  const host =
    o.host ??
    (config.auth === undefined
      ? `localhost:${config.listen.port}`
      : new URL(config.auth.publicUrl).host)
  const identity: OwnIdentity = {
    clientInfo: o.clientInfo,
    clientCapabilities: o.clientCapabilities,
    headers: Object.entries(o.headers).flat(),
    address: o.address,
    host,
    sampleRatio: config.telemetry?.sampleRatio,
  }
  identities.set(config, identity)
  return identity
}
