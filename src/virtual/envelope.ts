import { isRecord, type JsonRpcMessage } from '../mcp/jsonrpc.js'
import type { VirtualSession } from './client-session.js'
import { locate } from '../mcp/rewrite.js'
import { SERVER_INFO_META } from './merge.js'
import { modernEnvelope } from '../mcp/outbound.js'

/** The body and message of a 2025-era request as the 2026-07-28 request a virtual server serves. */
export interface Modernised {
  readonly body: Buffer
  readonly message: JsonRpcMessage
}

/**
 * A 2025-era client's request to a virtual server, given the 2026-07-28 envelope its members need
 * (spec 2026-07-28 basic/index: every request carries protocol version and client capabilities in
 * `params._meta`), from what its session recorded at `initialize`. The body is spliced, not
 * re-serialised: only `params._meta` is added (or, when present, replaced by itself plus the
 * envelope keys), every other byte stays the client's, the id and its arguments included. The body
 * passed the strict reader (mcp/strict-json.ts), so `params` is there at most once; a `params`
 * that is not an object is refused (undefined).
 */
export function modernise(
  text: string,
  message: JsonRpcMessage,
  session: VirtualSession,
): Modernised | undefined {
  const params = message.params
  const meta = isRecord(params?._meta) ? params._meta : {}
  const envelope = { ...meta, ...modernEnvelope(session.clientInfo, session.capabilities) }
  const metaText = JSON.stringify(envelope)
  let out: string | undefined
  if (params === undefined) {
    // SECURITY: a `params` the reader did not take for an object (null) is not doubled up.
    if (locate(text, ['params']) !== undefined) return undefined
    // No params at all: the object gets one, as its first member.
    const open = text.indexOf('{')
    if (open < 0) return undefined
    out = `${text.slice(0, open + 1)}"params":{"_meta":${metaText}},${text.slice(open + 1)}`
  } else if (params._meta !== undefined) {
    const span = locate(text, ['params', '_meta'])
    if (span === undefined) return undefined
    out = text.slice(0, span[0]) + metaText + text.slice(span[1])
  } else {
    const span = locate(text, ['params'])
    if (span === undefined || text[span[0]] !== '{') return undefined
    const comma = Object.keys(params).length === 0 ? '' : ','
    out = `${text.slice(0, span[0] + 1)}"_meta":${metaText}${comma}${text.slice(span[0] + 1)}`
  }
  return {
    body: Buffer.from(out, 'utf8'),
    message: { ...message, params: { ...(params ?? {}), _meta: envelope } },
  }
}

/**
 * A 2026-07-28 member's result as a 2025-era client of the virtual server gets it: without the
 * fields its era does not have (`resultType`, `ttlMs`, `cacheScope`, `_meta` serverInfo), as the
 * member's own endpoint answers a 2025-era request. Clients that turn any result `_meta` into
 * content (LangChain's adapters) would otherwise show the gateway's bookkeeping to a model.
 */
export function legacyResult(
  message: Record<string, unknown>,
): Record<string, unknown> | undefined {
  const result = message.result
  if (!isRecord(result)) return undefined
  const { resultType: _r, ttlMs: _t, cacheScope: _c, _meta, ...rest } = result
  if (isRecord(_meta)) {
    const { [SERVER_INFO_META]: _s, ...meta } = _meta
    if (Object.keys(meta).length > 0) rest._meta = meta
  } else if (_meta !== undefined) rest._meta = _meta
  return { ...message, result: rest }
}
