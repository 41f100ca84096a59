import type { Worker } from 'node:cluster'
import { AggregatorRegistry } from 'prom-client'
import type { MetricJson } from '../status/reading.js'
import type { ProcessReport } from '../status/report.js'
import type { StatusSource } from '../status/service.js'
import { isStatusReply, type StatusReply, type StatusRequest } from './messages.js'

/** How long the primary waits for the workers' reports; one that does not answer is left out. */
const WAIT_MS = 2000

/**
 * The status source of a primary (docs/operations.md §Status page): asks every worker for its
 * report and its registry's metrics, and sums the metrics with prom-client's AggregatorRegistry,
 * exactly as the primary's /metrics does. `live` lists the workers to ask.
 */
export class ClusterStatus implements StatusSource {
  private next = 0
  private readonly waiting = new Map<number, (reply: StatusReply) => void>()

  constructor(private readonly live: () => readonly Worker[]) {}

  /** A worker's message: a reply to a request in progress, or not for this. */
  onMessage(msg: unknown): void {
    if (isStatusReply(msg)) this.waiting.get(msg.id)?.(msg)
  }

  async collect(): Promise<{ reports: ProcessReport[]; metrics: MetricJson[] }> {
    const workers = this.live().filter((w) => w.isConnected())
    const replies = await Promise.all(workers.map((w) => this.ask(w)))
    const got = replies.filter((r): r is StatusReply => r !== undefined)
    const metrics =
      got.length === 0
        ? []
        : await AggregatorRegistry.aggregate(
            got.map((r) => r.metrics) as Parameters<typeof AggregatorRegistry.aggregate>[0],
          ).getMetricsAsJSON()
    return { reports: got.map((r) => r.report), metrics }
  }

  private ask(w: Worker): Promise<StatusReply | undefined> {
    const id = this.next++
    return new Promise((resolve) => {
      const done = (reply: StatusReply | undefined): void => {
        clearTimeout(timer)
        this.waiting.delete(id)
        resolve(reply)
      }
      const timer = setTimeout(() => done(undefined), WAIT_MS)
      this.waiting.set(id, (reply) => {
        // Only the worker asked may answer: ids are per request, and a reply names its own.
        if (reply.report.pid === w.process.pid) done(reply)
      })
      const request: StatusRequest = { type: 'mcp-edge:status?', id }
      try {
        w.send(request)
      } catch {
        done(undefined)
      }
    })
  }
}
