import type { ServerConfig } from '../config/schema.js'
import { GatewayError } from '../errors.js'
import type { McpTarget } from '../mcp/classify.js'
import { resultTransform } from '../mcp/result-transform.js'
import { RETRY_SAFE_METHODS } from '../mcp/methods.js'
import { sendWithRetries } from './attempts.js'
import type { ServerBalancing } from './balancing.js'
import type { HeaderMap } from '../mcp/body-transform.js'
import type { HandleOwner } from './sessions.js'
import type { Upstream } from './upstream.js'
import { CollectingResponse } from '../virtual/collect.js'

/** What a virtual server needs of a member (a ServerRuntime has all of it). */
export interface MemberRuntime {
  readonly name: string
  readonly config: ServerConfig
  readonly balancing: ServerBalancing
  /** Configured upstream headers as [name, value, …]. */
  readonly upstreamHeaders: readonly string[]
}

/** One request to one member, as the member's own endpoint would forward it. */
export interface MemberRequest {
  /** Built like the proxy stage's: the judged client headers, the member's own, gateway-owned ones. */
  readonly headers: readonly string[]
  /** The judged body, or its bounded rewrite (mcp/rewrite.ts). */
  readonly body: Buffer
  readonly method: string
  /** The request id as the client wrote it: the member's answer must carry it. */
  readonly rawId: string
  readonly targets: readonly McpTarget[]
  readonly owner: HandleOwner | undefined
  /** Largest answer read (limits.maxInspectBytes); beyond it the member counts as failed. */
  readonly maxBytes: number
  /** Stops waiting (fan-out deadline): the member request is aborted. */
  readonly signal?: AbortSignal | undefined
  /** The replica that holds the member's 2025-era session (virtual/member-era.ts), if any. */
  readonly pinned?: Upstream | undefined
  /** Each try of a replica (a span event, when telemetry is on: pipeline/virtual-trace.ts). */
  readonly onAttempt?: ((replica: string, retry: number) => void) | undefined
}

/** A member's final JSON-RPC response (a result or an error), and its HTTP status. */
export interface MemberAnswer {
  readonly status: number
  readonly message: Record<string, unknown>
  /** The member's `Mcp-Session-Id` response header (a 2025-era member's `initialize`). */
  readonly sessionId?: string | undefined
  /** The replica that answered. */
  readonly upstream?: Upstream | undefined
}

/**
 * Sends `req` to `member` through the member's own attempt loop (its replicas, retries, health
 * and ejection: upstream/attempts.ts) and collects the final response instead of relaying it.
 * The answer is read by the same bounded, id-checked reader as a filtered answer
 * (mcp/result-transform.ts), JSON or SSE alike. Throws GatewayError / UpstreamFailure when the
 * member fails, answers something that is not the response to this request, or is abandoned.
 */
export async function callMember(member: MemberRuntime, req: MemberRequest): Promise<MemberAnswer> {
  const sink = new CollectingResponse()
  const onAbort = (): void => sink.abandon()
  if (req.signal?.aborted === true) throw new GatewayError('upstream_timeout', 'fan-out deadline')
  req.signal?.addEventListener('abort', onAbort, { once: true })
  let message: Record<string, unknown> | undefined
  const b = member.balancing
  try {
    const plan = {
      pool: b.poolFor(req.targets),
      pinned: req.pinned,
      hashKey: undefined,
      safe: RETRY_SAFE_METHODS.has(req.method),
      legacy: false,
      owner: req.owner,
      method: 'POST' as const,
      headers: req.headers,
      body: req.body,
      transform: (status: number, h: HeaderMap) =>
        resultTransform(
          String(h['content-type'] ?? ''),
          req.maxBytes,
          [
            (m) => {
              message = m
              return undefined
            },
          ],
          'rewrite',
          req.rawId,
        ),
      stop: undefined,
      upstream: undefined as Upstream | undefined,
      onAttempt: req.onAttempt,
    }
    const result = await sendWithRetries(sink.asResponse(), b, plan)
    if (result.kind !== 'done' || message === undefined) {
      if (sink.destroyed) throw new GatewayError('upstream_timeout', 'fan-out deadline')
      throw new GatewayError('upstream_bad_response', `member ${member.name}: no answer`)
    }
    const sid = sink.headers['mcp-session-id']
    return {
      status: result.status,
      message,
      sessionId: typeof sid === 'string' ? sid : undefined,
      upstream: plan.upstream,
    }
  } finally {
    req.signal?.removeEventListener('abort', onAbort)
  }
}
