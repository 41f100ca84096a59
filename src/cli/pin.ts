/**
 * `mcp-edge pin` and `mcp-edge pin --check` (docs/catalog.md §Pinning): ask every configured
 * server for its tools and prompts and write their digests to the lock file, or compare them with
 * it and report what drifted.
 */
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { rename, rm, writeFile } from 'node:fs/promises'
import { basename, dirname, isAbsolute, join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { pino } from 'pino'
import { ownIdentity } from '../catalog/config.js'
import {
  definitionDigest,
  instructionsView,
  modelView,
  type CatalogKind,
} from '../catalog/definition.js'
import { compareCatalogs, renderChanges } from '../catalog/diff.js'
import {
  readLock,
  renderLock,
  type CatalogLock,
  type LockedDefinition,
  type ServerLock,
} from '../catalog/lock.js'
import { ConfigError, loadConfigFile, type LoadedConfig } from '../runtime/load.js'
import { ServerBalancing } from '../upstream/balancing.js'
import { Lifecycle } from '../upstream/lifecycle.js'
import { sessionKey } from '../upstream/sessions.js'
import type { AskServer } from '../client/ask.js'
import { fetchDefinitions, type ServerDefinitions } from './pin-fetch.js'
import { problemsText } from './problems.js'
import { PIN_USAGE } from './usage.js'

/** Exit codes: 0 written / no drift, 1 drift (--check), 2 usage, config or connection error. */
const PIN_EXIT = { ok: 0, drift: 1, error: 2 } as const

/** Where the command writes; `color` is true when `out` is a terminal. */
interface PinIo {
  out(text: string): void
  err(text: string): void
  readonly color: boolean
}

/** `mcp-edge pin`: see PIN_USAGE. */
export async function pinCommand(
  file: string,
  args: readonly string[],
  io: PinIo,
): Promise<number> {
  let opts
  try {
    opts = parseArgs({
      args: [...args],
      options: {
        config: { type: 'string', short: 'c' },
        lock: { type: 'string' },
        server: { type: 'string', multiple: true },
        check: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }).values
  } catch (err) {
    io.err(`mcp-edge pin: ${(err as Error).message}\n${PIN_USAGE}`)
    return PIN_EXIT.error
  }
  let loaded: LoadedConfig
  try {
    loaded = loadConfigFile(file, process.env, { lock: false }) // the lock is what pin writes
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    io.err(problemsText(file, err))
    return PIN_EXIT.error
  }
  const configured = Object.keys(loaded.config.servers)
  const selected = opts.server ?? configured
  const unknown = selected.filter((s) => !configured.includes(s))
  if (unknown.length > 0) {
    io.err(`mcp-edge pin: no server ${unknown.map((s) => `"${s}"`).join(', ')} in ${file}\n`)
    return PIN_EXIT.error
  }
  const lockPath = lockPathOf(loaded, opts.lock)

  const fetched = await fetchAll(loaded, selected)
  if (fetched.failures.length > 0) {
    for (const f of fetched.failures) io.err(`mcp-edge pin: ${f}\n`)
    io.err(`mcp-edge pin: ${opts.check === true ? 'nothing checked' : `${lockPath} not written`}\n`)
    return PIN_EXIT.error
  }
  const current: CatalogLock = { version: 1, servers: fetched.servers }

  let previous: CatalogLock | undefined
  if (existsSync(lockPath)) {
    try {
      previous = await readLock(lockPath)
    } catch (err) {
      // A full re-pin replaces an unreadable lock; a check or a partial pin needs it.
      if (opts.check === true || opts.server !== undefined) {
        io.err(`mcp-edge pin: ${(err as Error).message}\n`)
        return PIN_EXIT.error
      }
      io.err(`mcp-edge pin: replacing an unreadable lock: ${(err as Error).message}\n`)
    }
  } else if (opts.check === true) {
    io.err(`mcp-edge pin: no lock at ${lockPath}; run mcp-edge pin --config ${file} first\n`)
    return PIN_EXIT.error
  }

  if (opts.check === true) {
    // Without --server the lock must also not name servers the config no longer has.
    const changes = compareCatalogs(previous as CatalogLock, current, opts.server)
    if (changes.length === 0) {
      io.out(`${lockPath}: ${summary(current)}; no drift\n`)
      return PIN_EXIT.ok
    }
    io.out(renderChanges(changes, { color: io.color }))
    io.out(`${lockPath}: ${changes.length} definition(s) drifted; review, then run mcp-edge pin\n`)
    return PIN_EXIT.drift
  }

  const next = opts.server === undefined ? current : merged(previous, current)
  await writeAtomically(lockPath, renderLock(next))
  const changes = previous === undefined ? [] : compareCatalogs(previous, next)
  const counts = ['added', 'changed', 'removed']
    .map((c) => [c, changes.filter((x) => x.change === c).length] as const)
    .filter(([, n]) => n > 0)
    .map(([c, n]) => `${n} ${c}`)
  io.out(
    `${lockPath}: ${summary(current)}` +
      (previous === undefined
        ? ' (new lock)'
        : counts.length > 0
          ? ` (${counts.join(', ')})`
          : ' (unchanged)') +
      '\n',
  )
  return PIN_EXIT.ok
}

/** `--lock`, else `pinning.lockFile`, else catalog.lock.yaml; relative to the config's folder. */
function lockPathOf(loaded: LoadedConfig, flag: string | undefined): string {
  if (flag !== undefined) return resolve(flag) // a flag is relative to where the command runs
  const p = loaded.config.pinning?.lockFile ?? 'catalog.lock.yaml'
  return isAbsolute(p) ? p : resolve(loaded.dir, p)
}

/** Every selected server's definitions, asked at once; failures are collected, not thrown. */
async function fetchAll(
  loaded: LoadedConfig,
  selected: readonly string[],
): Promise<{ servers: Map<string, ServerLock>; failures: string[] }> {
  const { config } = loaded
  const ctx = {
    log: pino({ level: 'silent' }),
    metrics: undefined,
    lifecycle: new Lifecycle(),
    sessionKey: sessionKey(config.legacySessions?.key).key,
  }
  const members: AskServer[] = selected.map((name) => {
    const cfg = config.servers[name]!
    // As runtime/runtime.ts compiles them: configured headers go upstream on every request.
    const upstreamHeaders = Object.entries(cfg.headers).flat()
    return {
      name,
      config: cfg,
      upstreamHeaders,
      classify: { maxDepth: config.limits.maxJsonDepth },
      balancing: new ServerBalancing(name, cfg, upstreamHeaders, ctx),
    }
  })
  const failures: string[] = []
  const servers = new Map<string, ServerLock>()
  try {
    const outcomes = await Promise.allSettled(
      members.map((m) => {
        if (m.config.tokenExchange !== undefined) {
          // The upstream token is exchanged for a caller's; a pin has no caller.
          const why = `server ${m.name}: its credentials come from token exchange, which needs a caller's token; set upstream headers for it or leave it out with --server`
          return Promise.reject(new Error(why))
        }
        return fetchDefinitions(m, config.limits.maxInspectBytes, ownIdentity(config))
      }),
    )
    outcomes.forEach((o, i) => {
      const m = members[i]!
      if (o.status === 'rejected') failures.push(`${(o.reason as Error).message}${tried(m)}`)
      else servers.set(m.name, lockOf(o.value))
    })
  } finally {
    await Promise.all(members.map((m) => m.balancing.close()))
  }
  return { servers, failures }
}

/**
 * ` (tried http://10.0.0.1:9101/mcp)`: where a server that failed was asked, so an unreachable
 * one is named by its address. Origin and path only, as the status page shows a replica: a URL
 * may carry credentials or a key in its query.
 */
function tried(m: AskServer): string {
  if (m.config.tokenExchange !== undefined) return '' // never asked (see fetchAll)
  const urls = m.config.upstreams.map((u) => {
    const url = new URL(u.url)
    return `${url.origin}${url.pathname}`
  })
  return ` (tried ${urls.join(', ')})`
}

/** One server's instructions and definitions as lock entries: the model view and its digest. */
function lockOf(defs: ServerDefinitions): ServerLock {
  const one = (kind: CatalogKind | 'skills'): Map<string, LockedDefinition> => {
    const out = new Map<string, LockedDefinition>()
    for (const [name, item] of defs[kind]) {
      out.set(name, { digest: definitionDigest(kind, item), definition: modelView(kind, item) })
    }
    return out
  }
  const view = instructionsView(defs.instructions)
  const instructions =
    defs.instructions === undefined
      ? undefined
      : { digest: definitionDigest('instructions', view), definition: view }
  return { instructions, tools: one('tools'), prompts: one('prompts'), skills: one('skills') }
}

/** The previous lock with the servers just pinned replaced (`--server`). */
function merged(previous: CatalogLock | undefined, current: CatalogLock): CatalogLock {
  const servers = new Map(previous?.servers ?? [])
  for (const [name, lock] of current.servers) servers.set(name, lock)
  return { version: 1, servers }
}

function summary(lock: CatalogLock): string {
  let tools = 0
  let prompts = 0
  let skills = 0
  let instructions = 0
  for (const s of lock.servers.values()) {
    tools += s.tools.size
    prompts += s.prompts.size
    skills += s.skills?.size ?? 0
    if (s.instructions !== undefined) instructions++
  }
  const of = `of ${lock.servers.size} server(s)`
  const parts = [`${tools} tool(s)`, `${prompts} prompt(s)`]
  if (skills > 0) parts.push(`${skills} skill(s)`)
  if (instructions > 0) parts.push(`${instructions} instructions`)
  const last = parts.pop() as string
  return `${parts.join(', ')} and ${last} ${of}`
}

/** Writes beside the target, then renames over it: a reader sees the old lock or the new one. */
async function writeAtomically(path: string, text: string): Promise<void> {
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`)
  try {
    await writeFile(tmp, text, { flag: 'wx' })
    await rename(tmp, path)
  } catch (err) {
    await rm(tmp, { force: true })
    throw err
  }
}
