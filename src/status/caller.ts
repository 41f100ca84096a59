import { createHash } from 'node:crypto'

/** Longest issuer or subject shown as text (`admin.showSubjects: true`); claims come from clients. */
const MAX_SHOWN = 256

/** Who made a request, as the status page shows it. */
export interface CallerId {
  readonly issuer: string | undefined
  readonly subject: string | undefined
}

/**
 * The caller as the status page names it (docs/operations.md §Status page): `anonymous` without a
 * verified token; otherwise the first 12 hex digits of SHA-256 over `issuer`, a newline and
 * `subject`, the same in every worker and across restarts, so an operator can compute it from an
 * audit-log line (`printf '%s\n%s' "$iss" "$sub" | sha256sum | cut -c1-12`). With `showSubjects`
 * the issuer and subject themselves, bounded.
 */
export function callerLabel(caller: CallerId | undefined, showSubjects: boolean): string {
  if (caller === undefined || (caller.issuer === undefined && caller.subject === undefined))
    return 'anonymous'
  const iss = caller.issuer ?? ''
  const sub = caller.subject ?? ''
  if (showSubjects) return `${bounded(sub)} (${bounded(iss)})`
  return shortHash(`${iss}\n${sub}`)
}

/** A short stable hash of a value (12 hex digits of SHA-256), for names an operator should not read. */
export function shortHash(value: string): string {
  return createHash('sha256').update(value).digest('hex').slice(0, 12)
}

function bounded(text: string): string {
  return text.length <= MAX_SHOWN ? text : `${text.slice(0, MAX_SHOWN)}…`
}
