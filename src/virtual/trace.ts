import { GatewayError } from '../errors.js'
import { EVENT } from '../telemetry/events.js'
import type { RequestTrace } from '../telemetry/request-trace.js'
import type { Outcome } from './fan-out.js'

/**
 * One span event per member of a fan-out (discovery, a list page; docs/operations.md "Virtual
 * servers"): its name and outcome, `ok` for an answer (an error answer included), `timeout` past
 * the fan-out deadline, else the reason code. Without `telemetry:` there is no trace.
 */
export function memberEvents(
  trace: RequestTrace | undefined,
  method: string,
  members: readonly string[],
  outcomes: readonly Outcome<unknown>[],
): void {
  if (trace === undefined) return
  outcomes.forEach((o, i) => {
    const outcome = o.ok
      ? 'ok'
      : o.timedOut
        ? 'timeout'
        : o.error instanceof GatewayError
          ? o.error.code
          : 'error'
    trace.event(EVENT.member, {
      'mcp_edge.member': members[i] ?? '',
      'mcp.method.name': method,
      outcome,
    })
  })
}
