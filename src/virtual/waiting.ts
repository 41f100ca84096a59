import { CONNECT_META } from '../endpoint/connect-answers.js'
import { GatewayError } from '../errors.js'
import { isRecord } from '../mcp/jsonrpc.js'

/** A member left out of a merged answer because the caller has not connected to its service. */
interface Waiting {
  readonly server: string
  readonly service: unknown
  readonly connectUrl: unknown
}

/**
 * The `_meta` of a merged answer that leaves out members waiting for the caller to connect their
 * account (docs/auth.md §Per-user credentials, virtual servers): which members, and where each is
 * connected; empty when none waits. The member's own endpoint said so (endpoint/exchange.ts).
 */
export function waitingMeta(
  outcomes: readonly { readonly ok: boolean; readonly error?: unknown }[],
): Record<string, unknown> {
  const waiting: Waiting[] = []
  for (const o of outcomes) {
    const err = o.ok ? undefined : o.error
    if (!(err instanceof GatewayError) || err.code !== 'user_connect_required') continue
    const data = isRecord(err.data) ? err.data : {}
    if (typeof data.server !== 'string') continue
    waiting.push({ server: data.server, service: data.service, connectUrl: data.connectUrl })
  }
  return waiting.length === 0 ? {} : { [CONNECT_META]: waiting }
}
