import { readdir, stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import type { Logger } from 'pino'
import { lockOf, lockPath } from '../catalog/config.js'
import { loadConfiguredPoliciesBeside, PolicyError } from '../policy/load.js'
import type { PolicySet } from '../policy/policy.js'
import { ConfigError, loadConfigFileBeside, type LoadedConfig } from './load.js'

const REJECTED = 'reload rejected, still running the previous config and policies'
/**
 * How much older than the first read the files must be for a start not to read them again: the
 * skew tolerated between this host's clock and a network mount's. Small, because files are often
 * written moments before a start (a Kubernetes ConfigMap volume is set up just before the
 * container runs), and those are what the start read.
 */
const CLOCK_MARGIN_MS = 250

/** What the watcher swaps in, and how often it looks. */
export interface WatchOptions {
  /** The config and policies running now. */
  readonly loaded: LoadedConfig
  readonly log: Logger
  /** Swaps in a changed config (a new runtime, its policies included). */
  readonly applyConfig: (next: LoadedConfig) => Promise<void>
  /** Swaps in changed policies only: pools and open streams are left alone. */
  readonly applyPolicy: (policy: PolicySet | undefined) => void
  /** How often the files are looked at (default 1 s, so a change is live within 2 s). */
  readonly pollMs?: number
}

/** A running watch on the config file and the policy folder. */
export interface ConfigWatcher {
  /** A rejected change, until a valid one replaces it: shown on /readyz, never unready. */
  warnings(): readonly string[]
  /** Re-reads and applies now (SIGHUP, tests). */
  check(): Promise<void>
  close(): void
}

/**
 * Watches the config file (when the gateway was started from one) and the policy folder by
 * polling their stat: fs.watch misses events on network and overlay mounts and on Kubernetes
 * ConfigMaps (which swap a symlink), and a stat of a few files per second costs nothing. A change
 * is validated in full and swapped in atomically; an invalid one keeps what runs, is logged and
 * shows on /readyz. Undefined when there is nothing to watch.
 */
export function watchConfig(opts: WatchOptions): ConfigWatcher | undefined {
  if (opts.loaded.file === undefined && opts.loaded.config.policies === undefined) return undefined
  const { log, pollMs = 1000 } = opts
  let current = opts.loaded
  let problem: string | undefined
  // Empty: the first poll always looks, so a change made between loading and watching is seen.
  let signature = ''
  let running: Promise<void> | undefined
  let again = false
  let closed = false

  const reload = async (): Promise<void> => {
    let next: LoadedConfig
    let what: 'config' | 'policies' | 'nothing'
    try {
      // What is about to be read is seen: a poll meanwhile does not read it all again (SIGHUP
      // after an edit would otherwise load a large policy folder twice). A file written during
      // the read changes the fingerprint after this one, and is read by the next poll.
      signature = (await fingerprint(current)).sig
      const serving = current.policy
      // Read and compiled beside the running config and policies, then swapped in at once.
      next =
        current.file === undefined
          ? {
              ...current,
              policy: await loadConfiguredPoliciesBeside(current.config, current.dir, serving),
            }
          : await loadConfigFileBeside(current.file, serving)
      what = changeIn(current, next)
      if (what === 'nothing' && problem === undefined) {
        log.debug('config read again, nothing changed')
        return
      }
      if (what === 'config') await opts.applyConfig(next)
      else if (what === 'policies') opts.applyPolicy(next.policy)
    } catch (err) {
      const known = err instanceof ConfigError || err instanceof PolicyError
      const problems = known ? err.problems : [String(err)]
      const more = problems.length > 1 ? ` (+${problems.length - 1} more)` : ''
      problem = `${REJECTED}: ${problems[0] ?? ''}${more}`
      log.warn({ problems }, 'config reload rejected; keeping the previous config and policies')
      return
    }
    current = next
    problem = undefined
    if (what === 'nothing') return
    const policy = next.policy
    log.info({ changed: what, policy: policy?.id, rules: policy?.rules.length }, 'config reloaded')
  }

  // One reload at a time; a request that arrives during one runs once more after it.
  const check = (): Promise<void> => {
    if (running !== undefined) {
      again = true
      return running
    }
    running = (async () => {
      do {
        again = false
        await reload()
      } while (again && !closed)
    })().finally(() => (running = undefined))
    return running
  }

  let polling = false
  const poll = setInterval(() => {
    if (polling) return
    polling = true
    fingerprint(current)
      .then(async ({ sig, newest }) => {
        if (sig === signature || closed) return
        const first = signature === ''
        signature = sig
        // Files untouched since well before they were read hold what runs: a start does not read
        // them all again (a large policy folder twice). The margin covers file systems whose
        // clock is not quite this host's (network mounts).
        const readAt = opts.loaded.readAt
        if (first && readAt !== undefined && newest < readAt - CLOCK_MARGIN_MS) return
        await check()
      })
      .catch((err: unknown) => log.warn({ err }, 'config poll failed'))
      .finally(() => (polling = false))
  }, pollMs)
  poll.unref()

  return {
    warnings: () => (problem === undefined ? [] : [problem]),
    check,
    close() {
      closed = true
      clearInterval(poll)
    },
  }
}

function changeIn(current: LoadedConfig, next: LoadedConfig): 'config' | 'policies' | 'nothing' {
  if (JSON.stringify(next.config) !== JSON.stringify(current.config)) return 'config'
  // A re-pinned lock (docs/catalog.md §Run-time pinning) is compiled into the servers' catalogs.
  if (lockText(next) !== lockText(current)) return 'config'
  if (next.policy?.id === current.policy?.id) return 'nothing'
  // SECURITY: a swap keeps the runtime's limiter and body reading, compiled from the policy it was
  // built with (runtime.ts); a policy that changes either needs a new runtime, or new limits would
  // not count and a new condition would judge arguments no strict scan had checked.
  return next.policy?.runtimeShape === current.policy?.runtimeShape ? 'policies' : 'config'
}

/** The pins a loaded config was read with, comparable across loads. */
function lockText(loaded: LoadedConfig): string {
  const lock = lockOf(loaded.config)
  if (lock === undefined) return ''
  const digests = (m: ReadonlyMap<string, { readonly digest: string }>): string[][] =>
    [...m].map(([name, d]) => [name, d.digest])
  return JSON.stringify(
    [...lock.servers].map(([s, l]) => [s, digests(l.tools), digests(l.prompts)]),
  )
}

/**
 * Inode, size and times of the config file, the policy folder and every file in it: a change in
 * any of them means "look again" (the reload itself decides whether anything changed).
 */
async function fingerprint(loaded: LoadedConfig): Promise<{ sig: string; newest: number }> {
  const policies = loaded.config.policies
  const folder = policies === undefined ? undefined : resolve(loaded.dir, policies)
  const files = loaded.file === undefined ? [] : [resolve(loaded.file)]
  const lock = lockPath(loaded.config, loaded.dir)
  if (lock !== undefined) files.push(lock)
  if (folder !== undefined) {
    const names = await readdir(folder).catch(() => [] as string[])
    files.push(folder, ...names.sort().map((n) => join(folder, n)))
  }
  let newest = 0
  const parts = await Promise.all(
    files.map((f) =>
      stat(f).then(
        (s) => {
          newest = Math.max(newest, s.mtimeMs, s.ctimeMs)
          return `${f}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`
        },
        () => {
          newest = Infinity
          return `${f}:-`
        },
      ),
    ),
  )
  return { sig: parts.join('\n'), newest }
}
