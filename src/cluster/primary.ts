import cluster, { type Worker } from 'node:cluster'
import { randomBytes } from 'node:crypto'
import { availableParallelism } from 'node:os'
import { AggregatorRegistry } from 'prom-client'
import type { GatewayConfig } from '../config/schema.js'
import { startAdmin } from '../observability/admin.js'
import { createLogger } from '../observability/log.js'
import { isHealthMessage, KEY_ENV, SLOT_ENV, type HealthMessage } from './messages.js'

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
 * `/metrics` summed over all workers; relays the checker worker's health results; forwards
 * SIGHUP (reload) and SIGTERM (drain) to every worker. Resolves with the exit code once the last
 * worker has exited after a signal, or 1 when a worker fails before the gateway ever listened.
 */
export async function runPrimary(config: GatewayConfig, count: number): Promise<number> {
  const log = createLogger(config.log.level).child({ role: 'primary' })
  const aggregator = new AggregatorRegistry()
  const admin =
    config.admin === undefined
      ? undefined
      : await startAdmin(
          { contentType: aggregator.contentType, metrics: () => aggregator.clusterMetrics() },
          config.admin.host,
          config.admin.port,
        )
  if (admin !== undefined)
    log.info({ host: config.admin?.host, port: admin.port }, 'admin listening')

  const slots: (Worker | undefined)[] = Array.from({ length: count }, () => undefined)
  const crashes: number[] = slots.map(() => 0)
  const restarts = new Set<NodeJS.Timeout>()
  const health = new Map<string, HealthMessage>()
  // Without legacySessions.key every worker would seal 2025-era ids with its own random key.
  const sealing = randomBytes(32).toString('hex')
  let listening = 0
  let up = false
  let stopping = false
  let failed = false
  let finish: (code: number) => void = () => undefined
  const done = new Promise<number>((resolve) => (finish = resolve))

  const live = (): Worker[] => slots.filter((w): w is Worker => w !== undefined)
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return
    stopping = true
    log.info({ signal, workers: live().length }, 'draining every worker')
    for (const t of restarts) clearTimeout(t)
    for (const w of live()) w.process.kill('SIGTERM')
    if (live().length === 0) finish(failed ? 1 : 0)
  }

  const fork = (slot: number): void => {
    const started = Date.now()
    const w = cluster.fork({ [SLOT_ENV]: String(slot), [KEY_ENV]: sealing })
    slots[slot] = w
    let listened = false
    w.on('message', (msg: unknown) => {
      if (!isHealthMessage(msg)) return
      health.set(`${msg.server} ${msg.url}`, msg)
      for (const other of live()) if (other !== w && other.isConnected()) other.send(msg)
    })
    w.once('online', () => {
      // A new worker starts with what the checker found so far.
      for (const msg of health.values()) w.send(msg)
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
        if (code !== 0) failed = true
        if (live().length === 0) void admin?.close().then(() => finish(failed ? 1 : 0))
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
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
  process.on('SIGHUP', () => {
    for (const w of live()) w.process.kill('SIGHUP')
  })
  const code = await done
  log.flush()
  return code
}
