import { GatewayError, type ErrorCode } from '../errors.js'

/** How an attempt failed, beyond its reason. */
export interface UpstreamFailureOptions {
  /**
   * The request may have reached the replica (PossiblyAccepted); false when it never left
   * (NotSent). Decides whether it may go to another replica (docs/design/retries.md).
   */
  readonly sent: boolean
  /** The replica's HTTP status, when it answered one. */
  readonly status?: number | undefined
  readonly cause?: unknown
  /** What the client is told besides the reason (GatewayError `detail`). */
  readonly detail?: string | undefined
  /**
   * The failure counts against the replica's health (connect failures, resets, timeouts, garbage,
   * a 5xx without a JSON-RPC body), as opposed to an answer the gateway could not use (a
   * redirect, too large to inspect …). Default false.
   */
  readonly replicaFault?: boolean
}

/**
 * An attempt that failed before a single byte went to the client, so it can still be answered
 * with a gateway error or retried.
 */
export class UpstreamFailure extends GatewayError {
  readonly sent: boolean
  readonly status: number | undefined
  readonly replicaFault: boolean

  constructor(code: ErrorCode, opts: UpstreamFailureOptions) {
    super(code, { cause: opts.cause, detail: opts.detail })
    this.sent = opts.sent
    this.status = opts.status
    this.replicaFault = opts.replicaFault ?? false
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
    return new UpstreamFailure('upstream_unavailable', {
      sent: false,
      status,
      cause: err,
      replicaFault: fault,
    })
  }
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new UpstreamFailure('upstream_timeout', {
      sent: true,
      status,
      cause: err,
      replicaFault: fault,
    })
  }
  if (
    code === 'UND_ERR_RESPONSE_STATUS_CODE' ||
    code.startsWith('HPE_') ||
    err.name === 'HTTPParserError'
  ) {
    return new UpstreamFailure('upstream_bad_response', {
      sent: true,
      status,
      cause: err,
      replicaFault: fault,
    })
  }
  return new UpstreamFailure('upstream_unavailable', {
    sent: true,
    status,
    cause: err,
    replicaFault: fault,
  })
}
