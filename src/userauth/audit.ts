import type { Logger } from 'pino'
import { bounded } from '../observability/bound.js'

/** What happened to a user's stored token. */
type UserTokenAction = 'connect' | 'refresh' | 'drop' | 'revoke'

/** One audit line about a user's token at a server: who and what, never the token. */
interface UserTokenEvent {
  readonly action: UserTokenAction
  readonly iss: string
  readonly sub: string
  readonly server: string
  /** Why a token was dropped (`invalid_grant`, `upstream_401`, `expired`) or who revoked it. */
  readonly reason?: string | undefined
}

export type UserTokenAudit = (event: UserTokenEvent) => void

const MESSAGES: Readonly<Record<UserTokenAction, string>> = {
  connect: 'user connected an account',
  refresh: 'user token refreshed',
  drop: 'user token dropped',
  revoke: 'user token revoked',
}

/**
 * Audit lines for connect, refresh, drop and revoke (docs/operations.md "Audit log"), as the
 * gateway's other audit lines: a child with `audit: true`, at `info` whatever `log.level` says
 * but `silent`. SECURITY: the user (issuer, subject) and the server only: never a token, a
 * refresh token, a code or a state (RFC 6750 §5.3: logs are read by more people than may hold
 * credentials).
 */
export function createUserTokenAudit(log: Logger): UserTokenAudit {
  const audit = log.child({ audit: true }, { level: log.level === 'silent' ? 'silent' : 'info' })
  return ({ action, iss, sub, server, reason }) =>
    audit.info(
      {
        decision: 'user_token',
        action,
        sub: bounded(sub),
        iss: bounded(iss),
        server,
        ...(reason === undefined ? {} : { reason }),
      },
      MESSAGES[action],
    )
}
