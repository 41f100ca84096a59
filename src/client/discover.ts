import { request, type Dispatcher } from 'undici'
import { isRecord } from '../mcp/jsonrpc.js'
import { GATEWAY_INFO } from '../mcp/protocol.js'
import { parseJson, SseParser } from './sse.js'
import { modernEnvelope, outboundHeaders } from '../mcp/outbound.js'

/** Where and how the gateway itself talks to one backend (its static upstream credentials). */
export interface UpstreamEndpoint {
  readonly url: string
  /** Configured upstream headers as [name, value, …]; never a client's token. */
  readonly headers: readonly string[]
  readonly dispatcher: Dispatcher
  readonly headersTimeoutMs: number
  /** Longest silence on the listen stream (keep-alive comments reset it); 0 = none. */
  readonly bodyTimeoutMs: number
}

/** subscriptions.mdx: the filter of a `subscriptions/listen` request. */
export interface ListenFilter {
  readonly toolsListChanged?: boolean
  readonly promptsListChanged?: boolean
  readonly resourcesListChanged?: boolean
  readonly resourceSubscriptions?: readonly string[]
}

/** The backend answered, but not with what a listen needs (no such method, 2025-era, error). */
export class ListenUnsupported extends Error {
  override readonly name = 'ListenUnsupported'
}

const MAX_DISCOVER_BYTES = 1024 * 1024

/** A 2026-07-28 request of the gateway's own, in its own name (mcp/outbound.ts envelope). */
export function rpcBody(id: string, method: string, params: Record<string, unknown> = {}): string {
  const _meta = modernEnvelope(GATEWAY_INFO)
  return JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta } })
}

/** The headers of a 2026-07-28 POST of the gateway's own (mcp/outbound.ts, the one builder). */
export function rpcHeaders(ep: UpstreamEndpoint, method: string): string[] {
  return outboundHeaders(ep.headers, { http: 'POST', method })
}

/**
 * Asks the backend what it can notify about (server/discover). Throws ListenUnsupported when it
 * answers without a usable result, any other error when it could not be reached.
 */
export async function discoverCapabilities(
  ep: UpstreamEndpoint,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  const res = await request(ep.url, {
    method: 'POST',
    headers: rpcHeaders(ep, 'server/discover'),
    body: rpcBody('mcp-edge-discover', 'server/discover'),
    dispatcher: ep.dispatcher,
    signal,
    headersTimeout: ep.headersTimeoutMs,
    bodyTimeout: ep.headersTimeoutMs,
  })
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length
    if (size > MAX_DISCOVER_BYTES) throw new ListenUnsupported('server/discover answer too large')
    chunks.push(chunk as Buffer)
  }
  const text = Buffer.concat(chunks).toString('utf8')
  if (res.statusCode >= 500) throw new Error(`server/discover answered ${res.statusCode}`)
  const sse = String(res.headers['content-type'] ?? '').startsWith('text/event-stream')
  const messages = sse ? new SseParser().push(Buffer.from(`${text}\n\n`)) : [text]
  for (const data of messages) {
    const msg = parseJson(data)
    if (!isRecord(msg) || !('result' in msg || 'error' in msg)) continue
    const caps = isRecord(msg.result) ? msg.result.capabilities : undefined
    if (isRecord(caps)) return caps
    throw new ListenUnsupported(`server/discover failed (HTTP ${res.statusCode})`)
  }
  throw new ListenUnsupported(`server/discover gave no result (HTTP ${res.statusCode})`)
}

/** The listen filter for what a backend advertises; undefined when it notifies about nothing. */
export function filterFor(
  caps: Readonly<Record<string, unknown>>,
  uris: readonly string[],
): ListenFilter | undefined {
  const tools = isRecord(caps.tools) && caps.tools.listChanged === true
  const prompts = isRecord(caps.prompts) && caps.prompts.listChanged === true
  const resources = isRecord(caps.resources) && caps.resources.listChanged === true
  const subscribe = isRecord(caps.resources) && caps.resources.subscribe === true
  if (!tools && !prompts && !resources && !subscribe) return undefined
  return {
    ...(tools && { toolsListChanged: true }),
    ...(prompts && { promptsListChanged: true }),
    ...(resources && { resourcesListChanged: true }),
    ...(subscribe && uris.length > 0 && { resourceSubscriptions: [...uris] }),
  }
}

/** Whether a backend can tell about changes to single resources (resources.subscribe). */
export function canSubscribe(caps: Readonly<Record<string, unknown>>): boolean {
  return isRecord(caps.resources) && caps.resources.subscribe === true
}
