import { createHash } from 'node:crypto'
import type { GatewayConfig } from '../config/schema.js'
import type { PolicySet } from '../policy/policy.js'
import type { ConfigReport, ReloadReport } from './report.js'

/** Problems of a refused reload kept for the page, and the length of each. */
const MAX_PROBLEMS = 20
const MAX_PROBLEM = 500

/**
 * What config runs and how the last reload went, for the status page: told by server.ts when a
 * reload is applied (a new config, or new policies alone); a refused one is what the config
 * watcher reports as its warning (runtime/watch.ts), noted when a report first sees it (the
 * status model looks every few seconds; the full list of problems is in the log line).
 */
export class ConfigRecord {
  private current: ConfigReport
  private last: ReloadReport | null = null
  /** The watcher warnings last seen, to tell a new refusal from the same one. */
  private seen = ''

  constructor(
    private readonly file: string | undefined,
    config: GatewayConfig,
    policy: PolicySet | undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.current = this.describe(config, policy)
  }

  /** A reload went in: a new config (`config`), or new policies over the same config. */
  applied(changed: 'config' | 'policies', config: GatewayConfig, policy: PolicySet | undefined) {
    this.current = this.describe(config, policy)
    const at = this.current.loadedAt
    this.last = { at, outcome: 'applied', changed, problems: [], resolvedAt: null }
  }

  /**
   * The config watcher's warnings now: a new one is a refused reload. Its warning gone with no
   * reload applied means the files on disk match the running config again (runtime/watch.ts
   * clears it when a re-read finds nothing to change): the refusal is resolved, not current.
   */
  observe(warnings: readonly string[]): void {
    const text = warnings.join('\n')
    if (text === this.seen) return
    this.seen = text
    if (warnings.length > 0) this.refused(warnings)
    else if (this.last?.outcome === 'refused' && this.last.resolvedAt === null)
      this.last = { ...this.last, resolvedAt: new Date(this.now()).toISOString() }
  }

  /** A reload was refused: the previous config and policies keep running. */
  refused(problems: readonly string[]): void {
    const kept = problems
      .slice(0, MAX_PROBLEMS)
      .map((p) => (p.length <= MAX_PROBLEM ? p : `${p.slice(0, MAX_PROBLEM)}…`))
    if (problems.length > MAX_PROBLEMS) kept.push(`(+${problems.length - MAX_PROBLEMS} more)`)
    const at = new Date(this.now()).toISOString()
    this.last = { at, outcome: 'refused', changed: null, problems: kept, resolvedAt: null }
  }

  report(): { readonly config: ConfigReport; readonly lastReload: ReloadReport | null } {
    return { config: this.current, lastReload: this.last }
  }

  private describe(config: GatewayConfig, policy: PolicySet | undefined): ConfigReport {
    const policyId = policy?.id ?? null
    // A digest, never the config itself: it holds substituted secrets (`${ENV}` references).
    const digest = createHash('sha256')
      .update(JSON.stringify({ config, policyId }))
      .digest('hex')
      .slice(0, 16)
    return {
      file: this.file ?? null,
      digest,
      policyId,
      policyMode: config.policyMode,
      loadedAt: new Date(this.now()).toISOString(),
    }
  }
}
