import { readdirSync, statSync, watch, type FSWatcher } from 'node:fs'
import { readdir, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import type { Logger } from 'pino'
import { loadConfiguredPolicies, PolicyError } from '../policy/load.js'
import type { PolicySet } from '../policy/policy.js'
import { ConfigError, loadConfigFile, type LoadedConfig } from './load.js'

const REJECTED = 'reload rejected, still running the previous config and policies'

/** What the watcher swaps in, and how often it looks. */
export interface WatchOptions {
  /** The config and policies running now. */
  readonly loaded: LoadedConfig
  readonly log: Logger
  /** Swaps in a changed config (a new runtime, its policies included). */
  readonly applyConfig: (next: LoadedConfig) => Promise<void>
  /** Swaps in changed policies only: pools and open streams are left alone. */
  readonly applyPolicy: (policy: PolicySet | undefined) => void
  /** Quiet time after a file event before reloading (editors write in several steps). */
  readonly debounceMs?: number
  /** Stat poll interval: the fallback where fs.watch misses events (network, overlay mounts). */
  readonly pollMs?: number
  /** false: poll only (tests of the fallback; file systems where fs.watch misbehaves). */
  readonly fsWatch?: boolean
}

/** A running watch on the config file and the policy folder. */
export interface ConfigWatcher {
  /** Readiness problems: a rejected change, until a valid one replaces it. */
  problems(): readonly string[]
  /** Re-reads and applies now (tests, SIGHUP). */
  check(): Promise<void>
  close(): void
}

/**
 * Watches the config file (when the gateway was started from one) and the policy folder; a change
 * is validated in full and swapped in atomically through the runtime ref. An invalid change keeps
 * what is running, logs why and shows on /readyz. Undefined when there is nothing to watch.
 */
export function watchConfig(opts: WatchOptions): ConfigWatcher | undefined {
  if (opts.loaded.file === undefined && opts.loaded.config.policies === undefined) return undefined
  const { log, debounceMs = 100, pollMs = 1000 } = opts
  let current = opts.loaded
  let problem: string | undefined
  let watchers: FSWatcher[] = []
  let watched = ''
  let signature = ''
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> | undefined
  let again = false
  let closed = false

  const schedule = (): void => {
    if (closed) return
    clearTimeout(timer)
    timer = setTimeout(() => void check(), debounceMs)
  }

  const rewatch = (): void => {
    if (opts.fsWatch === false) return
    const paths = watchedPaths(current)
    if (paths.join('\n') === watched) return
    for (const w of watchers) w.close()
    watched = paths.join('\n')
    watchers = paths.flatMap((p) => {
      try {
        // The folder, not the file: editors and ConfigMaps replace files by rename.
        const w = watch(p, { persistent: false }, schedule)
        w.on('error', (err) => log.warn({ err, path: p }, 'config watch failed; polling only'))
        return [w]
      } catch (err) {
        log.warn({ err, path: p }, 'config watch unavailable; polling only')
        return []
      }
    })
  }

  const reload = async (): Promise<void> => {
    let next: LoadedConfig
    let what: 'config' | 'policies' | 'nothing'
    try {
      next =
        current.file === undefined
          ? { ...current, policy: loadConfiguredPolicies(current.config, current.dir) }
          : loadConfigFile(current.file)
      what = JSON.stringify(next.config) !== JSON.stringify(current.config) ? 'config'
        : next.policy?.id !== current.policy?.id ? 'policies' : 'nothing'
      if (what === 'nothing' && problem === undefined) return
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
    const policy = next.policy
    log.info({ changed: what, policy: policy?.id, rules: policy?.rules.length }, 'config reloaded')
    rewatch()
  }

  const check = async (): Promise<void> => {
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

  const poll = setInterval(() => {
    void fingerprint(current).then((sig) => {
      if (sig !== signature) {
        signature = sig
        schedule()
      }
    })
  }, pollMs)
  poll.unref()
  signature = fingerprintSync(current)
  rewatch()

  return {
    problems: () => (problem === undefined ? [] : [problem]),
    check,
    close() {
      closed = true
      clearTimeout(timer)
      clearInterval(poll)
      for (const w of watchers) w.close()
    },
  }
}

/** The config file's folder and the policy folder. */
function watchedPaths(loaded: LoadedConfig): string[] {
  const paths: string[] = []
  if (loaded.file !== undefined) paths.push(dirname(resolve(loaded.file)))
  if (loaded.config.policies !== undefined) paths.push(resolve(loaded.dir, loaded.config.policies))
  return [...new Set(paths)]
}

/** Size, times and inode of every watched file: a change in any of them means "look again". */
async function fingerprint(loaded: LoadedConfig): Promise<string> {
  const { files, folder } = watchedFiles(loaded)
  const names = folder === undefined ? [] : await readdir(folder).catch(() => [] as string[])
  const all = [...files, ...names.sort().map((n) => join(folder ?? '', n))]
  const parts = await Promise.all(
    all.map((f) => stat(f).then((s) => describe(f, s), () => `${f}:-`)),
  )
  return parts.join('\n')
}

/** The same, synchronously: the first one is taken before polling starts so nothing slips by. */
function fingerprintSync(loaded: LoadedConfig): string {
  const { files, folder } = watchedFiles(loaded)
  let names: string[] = []
  try {
    if (folder !== undefined) names = readdirSync(folder)
  } catch {
    // a missing folder fingerprints as empty; the reload reports it
  }
  const all = [...files, ...names.sort().map((n) => join(folder ?? '', n))]
  return all
    .map((f) => {
      try {
        return describe(f, statSync(f))
      } catch {
        return `${f}:-`
      }
    })
    .join('\n')
}

function watchedFiles(loaded: LoadedConfig): { files: string[]; folder: string | undefined } {
  const policies = loaded.config.policies
  const folder = policies === undefined ? undefined : resolve(loaded.dir, policies)
  const files = loaded.file === undefined ? [] : [resolve(loaded.file)]
  return { files: folder === undefined ? files : [...files, folder], folder }
}

type StatLike = { mtimeMs: number; ctimeMs: number; size: number; ino: number }

function describe(path: string, s: StatLike): string {
  return `${path}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`
}
