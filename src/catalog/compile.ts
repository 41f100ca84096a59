import { createHash } from 'node:crypto'
import type { GatewayConfig } from '../config/schema.js'
import { lockOf, ownIdentity } from './config.js'
import { ServerCatalog, type CuratedConfig } from './curate.js'
import type { ServerLock } from './lock.js'
import { PinState, type DriftReporter } from './pin-state.js'

/**
 * The catalog view of one server, or undefined when it has neither curation nor pinning (the
 * catalog stage then costs its requests nothing). `config` is a loaded one: with `pinning:` its
 * lock was read with it (catalog/config.ts).
 */
export function compileCatalog(
  server: string,
  cfg: CuratedConfig,
  config: GatewayConfig,
  report: DriftReporter,
): ServerCatalog | undefined {
  const pinning = config.pinning
  const curated =
    Object.keys(cfg.tools).length > 0 ||
    Object.keys(cfg.prompts).length > 0 ||
    Object.keys(cfg.skills ?? {}).length > 0 ||
    cfg.instructions !== undefined
  if (!curated && pinning === undefined) return undefined
  const lock = lockOf(config)
  // SECURITY: with `pinning:` set a runtime never serves a definition without its lock.
  if (pinning !== undefined && lock === undefined)
    throw new Error('pinning: is set but no lock file was loaded with the config')
  // A server the lock does not name has no pins: all it says is then new (newTools).
  const serverLock = pinning === undefined ? undefined : lock?.servers.get(server)
  const pins = pinning === undefined ? undefined : new PinState(server, serverLock, pinning, report)
  const key = keyOf(cfg, pinning, pinning === undefined ? undefined : (serverLock ?? null))
  return new ServerCatalog(server, cfg, pins, key, ownIdentity(config))
}

/**
 * Equal keys rewrite every list and discovery identically: the curation, the modes and the
 * pinned digests (`null`: a server the lock does not name; undefined: no pinning).
 */
function keyOf(
  cfg: CuratedConfig,
  pinning: GatewayConfig['pinning'],
  lock: ServerLock | null | undefined,
): string {
  const pins =
    lock === undefined
      ? null
      : lock === null
        ? 'unpinned'
        : [
            lock.instructions?.digest ?? null,
            ...(['tools', 'prompts'] as const).map((k) =>
              [...lock[k]].map(([n, d]) => [n, d.digest]),
            ),
            [...(lock.skills ?? [])].map(([n, d]) => [n, d.digest]),
          ]
  const text = JSON.stringify([
    cfg.tools,
    cfg.prompts,
    cfg.instructions ?? null,
    cfg.skills ?? {},
    pinning?.onDrift,
    pinning?.newTools,
    pins,
  ])
  return `catalog:${createHash('sha256').update(text).digest('base64url').slice(0, 22)}`
}
