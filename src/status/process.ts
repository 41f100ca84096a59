import type { AuditLog } from '../observability/audit.js'
import type { LoadedConfig } from '../runtime/load.js'
import { ConfigRecord } from './config-record.js'
import { DenialLog } from './denials.js'
import { HealthLog } from './health-log.js'

export { recordingHealthShare } from './health-log.js'
import { LimitedCallers } from './limited.js'
import { localReport, type LocalSources } from './local.js'
import type { MetricJson } from './reading.js'
import type { ProcessReport } from './report.js'
import type { StatusSource } from './service.js'
import { tapAudit } from './tap.js'

/**
 * The status page's state in one gateway process (a single process, or each worker of a
 * primary): the bounded tables fed by the audit log, the last health checks, the config record.
 * Created only when `admin:` is configured; a gateway without it carries none of this.
 */
export interface ProcessStatus {
  readonly health: HealthLog
  readonly config: ConfigRecord
  /** The audit log every stage writes to, with the page's tables listening to its denials. */
  tapAudit(audit: AuditLog): AuditLog
  /** This process's report, once the runtime it reads exists. */
  reporter(src: ReporterSources): () => ProcessReport
}

/** What a report reads besides the tables kept here. */
export type ReporterSources = Omit<LocalSources, 'health' | 'denials' | 'limited' | 'config'>

export function createProcessStatus(loaded: LoadedConfig, showSubjects: boolean): ProcessStatus {
  const denials = new DenialLog(showSubjects)
  const limited = new LimitedCallers(showSubjects)
  const health = new HealthLog()
  const config = new ConfigRecord(loaded.file, loaded.config, loaded.policy)
  return {
    health,
    config,
    tapAudit: (audit) => tapAudit(audit, denials, limited),
    reporter: (src) => () => localReport({ ...src, health, denials, limited, config }),
  }
}

/** The status source of a gateway of one process: its own report and registry. */
export function localSource(
  report: () => ProcessReport,
  registry: { getMetricsAsJSON(): Promise<readonly MetricJson[]> },
): StatusSource {
  return {
    collect: async () => ({ reports: [report()], metrics: await registry.getMetricsAsJSON() }),
  }
}
