import type { AuditLog } from '../observability/audit.js'
import type { DenialLog } from './denials.js'
import type { LimitedCallers } from './limited.js'

/**
 * The audit log with the status page listening to its denial events: every entry still goes to
 * the audit log first, unchanged; a denial (or a dry run's "would deny") and a rate-limit refusal
 * are also handed to the page's bounded tables. Every decision is counted under its rule (one map
 * update), for the rules' hit counts.
 */
export function tapAudit(audit: AuditLog, denials: DenialLog, limited: LimitedCallers): AuditLog {
  return {
    record(entry) {
      audit.record(entry)
      denials.decided(entry.decision)
      if (!entry.decision.allow || entry.decision.dryRun) denials.denied(entry)
    },
    rateLimited(entry) {
      audit.rateLimited(entry)
      limited.refused(entry)
    },
    accessRefused: (entry) => audit.accessRefused(entry),
    drift: (event) => audit.drift(event),
  }
}
