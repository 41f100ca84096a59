import { AggregatorRegistry } from 'prom-client'
import type { GatewayMetrics } from '../observability/metrics.js'
import type { RuntimeRef } from '../runtime/ref.js'
import type { HealthShare } from '../upstream/health-share.js'
import { shareProcessKey } from '../upstream/sessions.js'
import { isHealthMessage, KEY_ENV, SLOT_ENV, type HealthMessage } from './messages.js'

/** A worker's side of the cluster: shared health state, metrics for the primary's /metrics. */
export interface ClusterWorker {
  readonly health: HealthShare
  /** Starts applying the checker's results to whatever runtime `ref` holds. */
  attach(ref: RuntimeRef): void
}

/**
 * Joins the primary started by `mcp-edge serve` with `workers` > 1 (docs/operations.md §Workers).
 * Slot 0 probes replicas and publishes every result; the primary relays them to the others.
 */
export function joinCluster(metrics: GatewayMetrics): ClusterWorker {
  // 2025-era session and task ids sealed by one worker must open in the others.
  const sealing = process.env[KEY_ENV]
  if (sealing !== undefined) shareProcessKey(Buffer.from(sealing, 'hex'))
  delete process.env[KEY_ENV]
  // The constructor installs the worker's answer to the primary's metrics requests.
  new AggregatorRegistry()
  AggregatorRegistry.setRegistries([metrics.registry])
  const known = new Map<string, HealthMessage>()
  const key = (server: string, url: string): string => `${server} ${url}`
  let ref: RuntimeRef | undefined
  process.on('message', (msg: unknown) => {
    if (!isHealthMessage(msg)) return
    known.set(key(msg.server, msg.url), msg)
    ref?.current.servers.get(msg.server)?.balancing.mirror(msg.url, msg.down, msg.reason)
  })
  // The primary is gone (killed): drain and exit rather than serve on unsupervised.
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'))
  return {
    health: {
      checker: process.env[SLOT_ENV] === '0',
      publish(server, url, down, reason) {
        const msg: HealthMessage = { type: 'mcp-edge:health', server, url, down, reason }
        if (process.connected) process.send?.(msg)
      },
      known: (server, url) => known.get(key(server, url)),
    },
    attach(r) {
      ref = r
    },
  }
}
