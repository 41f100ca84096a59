import type { ProcessReport } from './report.js'
import { mergeReports, type MergedReport } from './merge.js'
import {
  adminReadiness,
  statusDocument,
  type AdminReadiness,
  type GatewayFacts,
  type StatusDocument,
} from './model.js'
import { readMetrics, type MetricJson, type Reading } from './reading.js'
import { ReadingRing, SAMPLE_MS } from './windows.js'

/** How often the page's event stream sends the figures. */
const LIVE_MS = 2000
/** Where reports come from: this process (local.ts), or every worker of a primary (cluster/). */
export interface StatusSource {
  /** Every process's report, and its metrics summed over processes as /metrics sums them. */
  collect(): Promise<{
    readonly reports: readonly ProcessReport[]
    readonly metrics: readonly MetricJson[]
  }>
}

/** No process answered (every worker restarting): the page and /readyz say so. */
export class NoReports extends Error {
  override readonly name = 'NoReports'
}

interface Snapshot {
  readonly merged: MergedReport
  readonly reading: Reading
}

/**
 * The status model of one gateway: reads its counters every SAMPLE_MS into a bounded ring (the
 * windows and the chart), and answers status.json, the page and /readyz (admin) from one
 * snapshot at a time, shared by every request and subscriber. Nothing here runs per data-plane
 * request: the page's figures are the Prometheus registry's counters and the audit log's events.
 */
export class StatusService {
  private readonly ring: ReadingRing
  private sampler: NodeJS.Timeout | undefined
  private ticker: NodeJS.Timeout | undefined
  private pending: Promise<Snapshot> | undefined
  private readonly listeners = new Set<(doc: StatusDocument) => void>()

  constructor(
    private readonly source: StatusSource,
    private readonly facts: GatewayFacts,
    startedAt: number,
    private readonly now: () => number = Date.now,
  ) {
    this.ring = new ReadingRing(startedAt)
  }

  /** Starts sampling (the timer never keeps the process alive). */
  start(): void {
    this.sampler ??= setInterval(() => void this.snapshot().catch(() => undefined), SAMPLE_MS)
    this.sampler.unref()
  }

  async document(): Promise<StatusDocument> {
    const snap = await this.snapshot()
    return statusDocument(this.facts, snap.merged, snap.reading, this.ring)
  }

  async readiness(): Promise<AdminReadiness> {
    return adminReadiness(this.facts, (await this.snapshot()).merged)
  }

  /** Calls `listener` with a fresh document every LIVE_MS; returns the unsubscribe function. */
  subscribe(listener: (doc: StatusDocument) => void): () => void {
    this.listeners.add(listener)
    this.ticker ??= setInterval(() => void this.tick(), LIVE_MS)
    this.ticker.unref()
    return () => {
      this.listeners.delete(listener)
      if (this.listeners.size > 0 || this.ticker === undefined) return
      clearInterval(this.ticker)
      this.ticker = undefined
    }
  }

  get subscribers(): number {
    return this.listeners.size
  }

  close(): void {
    clearInterval(this.sampler)
    clearInterval(this.ticker)
    this.sampler = this.ticker = undefined
    this.listeners.clear()
  }

  private async tick(): Promise<void> {
    let doc: StatusDocument
    try {
      doc = await this.document()
    } catch {
      return // the next tick tries again; the page shows the last figures meanwhile
    }
    for (const l of this.listeners) l(doc)
  }

  /** One collection at a time, shared by whoever asks while it runs: the processes are asked once. */
  private snapshot(): Promise<Snapshot> {
    this.pending ??= this.collect().finally(() => (this.pending = undefined))
    return this.pending
  }

  private async collect(): Promise<Snapshot> {
    const { reports, metrics } = await this.source.collect()
    if (reports.length === 0) throw new NoReports('no gateway process answered')
    const at = this.now()
    const reading = readMetrics(metrics, at)
    this.ring.add(reading)
    return { merged: mergeReports(reports), reading }
  }
}
