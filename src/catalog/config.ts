import { readFileSync } from 'node:fs'
import { isAbsolute, resolve } from 'node:path'
import type { GatewayConfig } from '../config/schema.js'
import { hasForbiddenNameCharacter, printable } from '../mcp/names.js'
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
 * that is also curated.
 */
export function curationProblems(config: GatewayConfig): string[] {
  const problems: string[] = []
  for (const [server, s] of Object.entries(config.servers)) {
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
