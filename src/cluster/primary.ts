import cluster, { type Worker } from 'node:cluster'
import { randomBytes } from 'node:crypto'
import { availableParallelism } from 'node:os'
import { AggregatorRegistry } from 'prom-client'
import type { GatewayConfig } from '../config/schema.js'
import { startAdmin } from '../observability/admin.js'
import { createLogger } from '../observability/log.js'
import type { LoadedConfig } from '../runtime/load.js'
import { watchConfig } from '../runtime/watch.js'
import { isHealthMessage, KEY_ENV, SLOT_ENV, type HealthMessage } from './messages.js'
import { ClusterStatus } from './status.js'

/** Restart backoff of a crashing worker: 100 ms doubling to 30 s, reset after 30 s of uptime. */
const BACKOFF_MIN_MS = 100
const BACKOFF_MAX_MS = 30_000
const STABLE_MS = 30_000

/** How many workers `workers:` asks for: `auto` is one per core this process may use. */
export function workerCount(setting: GatewayConfig['workers']): number {
  return setting === 'auto' ? availableParallelism() : setting
}

/**
 * The primary of `workers` > 1 (docs/operations.md §Workers): forks the workers, which share the
 * listen port through node:cluster; restarts a crashed one with backoff; serves the admin
 * `/metrics` summed over all workers, and the status page and /readyz (admin) over their reports; relays the checker worker's health results; forwards
 * SIGHUP (reload) and SIGTERM (drain) to every worker. Resolves with the exit code once the last
 * worker has exited after a signal: 0 when every worker that was serving drained, whatever was
 * starting or restarting at that moment; 1 when one failed its drain, or when a worker fails
 * before the gateway ever listened.
 */
export async function runPrimary(loaded: LoadedConfig, count: number): Promise<number> {
  const config = loaded.config
  const log = createLogger(config.log.level).child({ role: 'primary' })
  const aggregator = new AggregatorRegistry()
  const slots: (Worker | undefined)[] = Array.from({ length: count }, () => undefined)
  const live = (): Worker[] => slots.filter((w): w is Worker => w !== undefined)
  // The status page and /readyz (admin) of the whole gateway: every worker's report, merged.
  const status = config.admin === undefined ? undefined : new ClusterStatus(live)
  const page =
    config.admin === undefined || status === undefined
      ? undefined
      : (await import('../status/web/admin-page.js')).createStatusPage(status, {
          admin: config.admin,
          workers: count,
          startedAt: Date.now(),
          metrics: {
            contentType: aggregator.contentType,
            metrics: () => aggregator.clusterMetrics(),
          },
        })
  for (const warning of page?.warnings ?? []) log.warn(warning)
  // Before any worker is forked: the data port opens only once the admin listener listens.
  const admin =
    config.admin === undefined || page === undefined
      ? undefined
      : await startAdmin(config.admin.host, config.admin.port, page.listener)
  if (admin !== undefined)
    log.info({ host: config.admin?.host, port: admin.port }, 'admin listening')
  // The admin listener is the primary's, so is its admin.token: the primary reads the config the
  // workers reload (the same files, polled, and SIGHUP) for it; a new token ends every sign-in.
  const watcher =
    page === undefined
      ? undefined
      : watchConfig({
          loaded,
          log,
          applyConfig: (next) => {
            page.setToken(next.config.admin?.token)
            return Promise.resolve()
          },
          applyPolicy: () => undefined,
        })

  const crashes: number[] = slots.map(() => 0)
  const restarts = new Set<NodeJS.Timeout>()
  const health = new Map<string, HealthMessage>()
  // The workers told to drain: only their exits decide the exit code (see `judge` below).
  const draining = new Set<Worker>()
  // Without legacySessions.key every worker would seal 2025-era ids with its own random key.
  const sealing = randomBytes(32).toString('hex')
  let listening = 0
  let up = false
  let stopping = false
  let failed = false
  let settled = false
  let finish: (code: number) => void = () => undefined
  const done = new Promise<number>((resolve) => (finish = resolve))

  // The last worker is gone: the admin listener closes (it would keep the process alive), then
  // the exit code is known. Reached from the last exit and from a stop with no worker left alike.
  const settle = (): void => {
    if (settled || live().length > 0) return
    settled = true
    watcher?.close()
    page?.close()
    const close = admin?.close() ?? Promise.resolve()
    void close.then(() => finish(failed ? 1 : 0))
  }
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return
    stopping = true
    log.info({ signal, workers: live().length }, 'draining every worker')
    // A crashed worker's restart is not due any more: a drain never starts a process.
    for (const t of restarts) clearTimeout(t)
    restarts.clear()
    for (const w of live()) {
      // A worker whose channel is already closed is exiting on its own (a crash that raced the
      // signal): it is not draining, and its exit was not caused by this stop.
      if (w.isConnected()) draining.add(w)
      w.process.kill('SIGTERM')
    }
    settle()
  }

  /**
   * Whether a worker's exit during a drain fails it. A worker that drained exits 0. One that was
   * still starting (forked, not yet listening: a restart in progress when the signal came) has
   * not installed its signal handlers, so SIGTERM ends it at once; it had accepted nothing, so
   * nothing was lost. One that had crashed before the signal already counted as a crash. Only a
   * worker that was serving, was told to drain and then did not exit 0 makes the drain a failure.
   */
  const judge = (w: Worker, listened: boolean, code: number | null, signal: string | null) => {
    const fields = { pid: w.process.pid, code, signal }
    if (code === 0) return
    if (!listened) log.info(fields, 'worker stopped before it listened')
    else if (!draining.has(w)) log.error(fields, 'worker exited before the drain reached it')
    else {
      failed = true
      log.error(fields, 'worker failed its drain')
    }
  }

  const fork = (slot: number): void => {
    if (stopping) return
    const started = Date.now()
    const w = cluster.fork({ [SLOT_ENV]: String(slot), [KEY_ENV]: sealing })
    slots[slot] = w
    log.info({ slot, pid: w.process.pid }, 'worker started')
    let listened = false
    // A send to a worker whose channel just closed emits 'error' on it; unhandled, that would
    // crash the primary (and with it every worker) over a health result nobody needs any more.
    w.on('error', (err: Error) => log.warn({ slot, err: err.message }, 'worker channel error'))
    w.on('message', (msg: unknown) => {
      status?.onMessage(msg)
      if (!isHealthMessage(msg)) return
      health.set(`${msg.server} ${msg.url}`, msg)
      for (const other of live()) if (other !== w && other.isConnected()) other.send(msg)
    })
    w.once('online', () => {
      // A new worker starts with what the checker found so far.
      for (const msg of health.values()) if (w.isConnected()) w.send(msg)
    })
    w.once('listening', (address) => {
      listened = true
      log.info({ slot, pid: w.process.pid }, 'worker listening')
      if (up || ++listening < count) return
      up = true
      log.info({ port: address.port, workers: count }, 'listening')
    })
    w.once('exit', (code, signal) => {
      if (slots[slot] === w) slots[slot] = undefined
      if (stopping) {
        judge(w, listened, code, signal)
        settle()
        return
      }
      if (!listened && !up) {
        // A worker that cannot start (port taken, bad config) would fail the same way again.
        log.error({ slot, code, signal }, 'worker failed to start; stopping')
        failed = true
        stop('SIGTERM')
        return
      }
      crashes[slot] = Date.now() - started > STABLE_MS ? 0 : (crashes[slot] ?? 0) + 1
      const ms = Math.min(BACKOFF_MIN_MS * 2 ** ((crashes[slot] ?? 1) - 1), BACKOFF_MAX_MS)
      log.error({ slot, pid: w.process.pid, code, signal, restartInMs: ms }, 'worker exited')
      const timer = setTimeout(() => {
        restarts.delete(timer)
        fork(slot)
      }, ms)
      restarts.add(timer)
    })
  }

  for (let slot = 0; slot < count; slot++) fork(slot)
  // Kubernetes and systemd signal the primary only: every worker drains or reloads.
  // `on`, not `once`: a second signal during the drain must not fall back to the default action
  // (the primary killed mid-drain, exit by signal); stop() ignores repeats.
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
  process.on('SIGHUP', () => {
    void watcher?.check()
    for (const w of live()) w.process.kill('SIGHUP')
  })
  const code = await done
  log.flush()
  return code
}
