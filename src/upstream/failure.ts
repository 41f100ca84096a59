import { GatewayError, type ErrorCode } from '../errors.js'

/**
 * An attempt that failed before a single byte went to the client, so it can still be answered
 * with a gateway error or retried. `sent` says whether the request may have reached the replica
 * (reliability.md §4.1: NotSent vs PossiblyAccepted); `replicaFault` whether the failure counts
 * against the replica's health (connect failures, resets, timeouts, garbage, a 5xx without a
 * JSON-RPC body), as opposed to an answer the gateway could not use (too large to inspect …).
 */
export class UpstreamFailure extends GatewayError {
  constructor(
    code: ErrorCode,
    readonly sent: boolean,
    readonly status: number | undefined,
    cause: unknown,
    readonly replicaFault = false,
  ) {
    super(code, undefined, undefined, { cause })
  }
}

// Errors raised before the request could have been written to the replica.
// prettier-ignore
const NOT_SENT_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED',
])
// The gateway closed the pool itself (reload, shutdown): not the replica's fault.
const OWN_CODES: ReadonlySet<string> = new Set([
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_ABORTED',
])

/** Maps a transport error to a failure: NotSent or possibly sent, and whose fault it is. */
export function classifyFailure(err: Error, status: number | undefined): UpstreamFailure {
  const code = (err as { code?: string }).code ?? ''
  const fault = !OWN_CODES.has(code)
  if (NOT_SENT_CODES.has(code)) {
    return new UpstreamFailure('upstream_unavailable', false, status, err, fault)
  }
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new UpstreamFailure('upstream_timeout', true, status, err, fault)
  }
  if (
    code === 'UND_ERR_RESPONSE_STATUS_CODE' ||
    code.startsWith('HPE_') ||
    err.name === 'HTTPParserError'
  ) {
    return new UpstreamFailure('upstream_bad_response', true, status, err, fault)
  }
  return new UpstreamFailure('upstream_unavailable', true, status, err, fault)
}
