import { AggregatorRegistry } from 'prom-client'
import type { GatewayMetrics } from '../observability/metrics.js'
import type { RuntimeRef } from '../runtime/ref.js'
import { HealthLog } from '../status/health-log.js'
import type { ProcessReport } from '../status/report.js'
import type { HealthShare } from '../upstream/health-share.js'
import { shareProcessKey } from '../upstream/sessions.js'
import {
  isHealthMessage,
  isStatusRequest,
  KEY_ENV,
  SLOT_ENV,
  type HealthMessage,
  type StatusReply,
} from './messages.js'

/** A worker's side of the cluster: shared health state, metrics for the primary's /metrics. */
export interface ClusterWorker {
  readonly health: HealthShare
  /** Starts applying the checker's results to whatever runtime `ref` holds. */
  attach(ref: RuntimeRef): void
  /** Answers the primary's status requests with `report` (the primary serves the status page). */
  serveStatus(report: () => ProcessReport): void
}

/**
 * Joins the primary started by `mcp-edge serve` with `workers` > 1 (docs/operations.md §Workers).
 * Slot 0 probes replicas and publishes every result; the primary relays them to the others. Every
 * worker keeps the last result per replica in `checks` (the status page's last health check).
 */
export function joinCluster(metrics: GatewayMetrics, checks = new HealthLog()): ClusterWorker {
  // 2025-era session and task ids sealed by one worker must open in the others.
  const sealing = process.env[KEY_ENV]
  if (sealing !== undefined) shareProcessKey(Buffer.from(sealing, 'hex'))
  delete process.env[KEY_ENV]
  // The constructor installs the worker's answer to the primary's metrics requests.
  new AggregatorRegistry()
  AggregatorRegistry.setRegistries([metrics.registry])
  let ref: RuntimeRef | undefined
  let report: (() => ProcessReport) | undefined
  const send = (msg: HealthMessage | StatusReply): void => {
    if (process.connected) process.send?.(msg)
  }
  // A report that cannot be made is not sent: the primary's wait for this worker ends on its own.
  const answer = async (id: number, r: () => ProcessReport): Promise<void> => {
    try {
      const m = await metrics.registry.getMetricsAsJSON()
      send({ type: 'mcp-edge:status', id, report: r(), metrics: m })
    } catch {
      return
    }
  }
  process.on('message', (msg: unknown) => {
    if (isStatusRequest(msg)) {
      const r = report
      if (r !== undefined) void answer(msg.id, r)
      return
    }
    if (!isHealthMessage(msg)) return
    checks.record(msg.server, msg.url, msg.down, msg.reason, msg.at)
    ref?.current.servers.get(msg.server)?.balancing.mirror(msg.url, msg.down, msg.reason)
  })
  // When the primary is gone, node:cluster ends the worker at once (its own 'disconnect'
  // handler exits with code 0): a worker never serves unsupervised.
  return {
    health: {
      checker: process.env[SLOT_ENV] === '0',
      publish(server, url, down, reason) {
        const at = Date.now()
        checks.record(server, url, down, reason, at)
        send({ type: 'mcp-edge:health', server, url, down, reason, at })
      },
      known: (server, url) => checks.get(server, url),
    },
    attach(r) {
      ref = r
    },
    serveStatus(r) {
      report = r
    },
  }
}
