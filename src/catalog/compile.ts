import { createHash } from 'node:crypto'
import type { GatewayConfig, ServerConfig } from '../config/schema.js'
import { lockOf } from './config.js'
import { ServerCatalog } from './curate.js'
import type { ServerLock } from './lock.js'
import { PinState, type DriftReporter } from './pin-state.js'

const NO_PINS: ServerLock = { tools: new Map(), prompts: new Map() }

/**
 * The catalog view of one server, or undefined when it has neither curation nor pinning (the
 * catalog stage then costs its requests nothing). `config` is a loaded one: with `pinning:` its
 * lock was read with it (catalog/config.ts).
 */
export function compileCatalog(
  server: string,
  cfg: Pick<ServerConfig, 'tools' | 'prompts'>,
  config: GatewayConfig,
  report: DriftReporter,
): ServerCatalog | undefined {
  const pinning = config.pinning
  const curated = Object.keys(cfg.tools).length > 0 || Object.keys(cfg.prompts).length > 0
  if (!curated && pinning === undefined) return undefined
  const lock = lockOf(config)
  // SECURITY: with `pinning:` set a runtime never serves a definition without its lock.
  if (pinning !== undefined && lock === undefined)
    throw new Error('pinning: is set but no lock file was loaded with the config')
  // A server the lock does not name has no pins: each definition is then new (newTools).
  const serverLock = pinning === undefined ? undefined : (lock?.servers.get(server) ?? NO_PINS)
  const pins =
    pinning === undefined || serverLock === undefined
      ? undefined
      : new PinState(server, serverLock, pinning, report)
  return new ServerCatalog(server, cfg, pins, keyOf(cfg, pinning, serverLock))
}

/** Equal keys rewrite every list identically: the curation, the modes and the pinned digests. */
function keyOf(
  cfg: Pick<ServerConfig, 'tools' | 'prompts'>,
  pinning: GatewayConfig['pinning'],
  lock: ServerLock | undefined,
): string {
  const pins =
    lock === undefined
      ? null
      : (['tools', 'prompts'] as const).map((k) => [...lock[k]].map(([n, d]) => [n, d.digest]))
  const text = JSON.stringify([cfg.tools, cfg.prompts, pinning?.onDrift, pinning?.newTools, pins])
  return `catalog:${createHash('sha256').update(text).digest('base64url').slice(0, 22)}`
}
