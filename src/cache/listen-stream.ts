import { StringDecoder } from 'node:string_decoder'
import { request, type Dispatcher } from 'undici'
import { isRecord } from '../mcp/jsonrpc.js'
import type { Invalidation } from './edge-cache.js'

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

const VERSION = '2026-07-28'
const MAX_DISCOVER_BYTES = 1024 * 1024
const MAX_EVENT_CHARS = 1024 * 1024

/** The 2026-07-28 request envelope (basic/index.mdx: every request carries it in `_meta`). */
function body(id: string, method: string, params: Record<string, unknown> = {}): string {
  const _meta = {
    'io.modelcontextprotocol/protocolVersion': VERSION,
    'io.modelcontextprotocol/clientInfo': { name: 'mcp-edge', version: '0.1.0' },
    'io.modelcontextprotocol/clientCapabilities': {},
  }
  return JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta } })
}

/** SEP-2243 headers for a request the gateway sends on its own behalf. */
function headers(ep: UpstreamEndpoint, method: string): string[] {
  return [
    'content-type', 'application/json',
    'accept', 'application/json, text/event-stream',
    'mcp-protocol-version', VERSION,
    'mcp-method', method,
    ...ep.headers,
  ]
}

/**
 * Asks the backend what it can notify about (server/discover). Throws ListenUnsupported when it
 * answers without a usable result, any other error when it could not be reached.
 */
export async function discoverCapabilities(ep: UpstreamEndpoint, signal: AbortSignal): Promise<Record<string, unknown>> {
  const res = await request(ep.url, {
    method: 'POST',
    headers: headers(ep, 'server/discover'),
    body: body('mcp-edge-discover', 'server/discover'),
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
export function filterFor(caps: Readonly<Record<string, unknown>>, uris: readonly string[]): ListenFilter | undefined {
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

/**
 * One upstream `subscriptions/listen` (subscriptions.mdx): a POST answered by a long-lived SSE
 * stream. `acked` resolves with the honoured filter once `notifications/subscriptions/acknowledged`
 * arrives; change notifications call `onChange`; `ended` resolves when the stream is over, for
 * whatever reason (a final result, an error, close()).
 */
export class ListenStream {
  readonly acked: Promise<ListenFilter>
  readonly ended: Promise<Error | undefined>
  private readonly abort = new AbortController()

  constructor(ep: UpstreamEndpoint, filter: ListenFilter, id: string, onChange: (what: Invalidation) => void) {
    let ack!: (f: ListenFilter) => void
    let nack!: (e: Error) => void
    this.acked = new Promise((resolve, reject) => ((ack = resolve), (nack = reject)))
    this.acked.catch(() => undefined)
    this.ended = this.run(ep, filter, id, onChange, ack).then(
      () => (nack(new Error('listen stream ended before its acknowledgement')), undefined),
      (err: unknown) => {
        const e = err instanceof Error ? err : new Error(String(err))
        nack(e)
        return e
      },
    )
  }

  /** Ends the stream (closing it is how a client cancels a listen; streamable-http §Cancellation). */
  close(): void {
    this.abort.abort(new Error('listen closed'))
  }

  private async run(
    ep: UpstreamEndpoint,
    filter: ListenFilter,
    id: string,
    onChange: (what: Invalidation) => void,
    ack: (f: ListenFilter) => void,
  ): Promise<void> {
    const res = await request(ep.url, {
      method: 'POST',
      headers: headers(ep, 'subscriptions/listen'),
      body: body(id, 'subscriptions/listen', { notifications: filter }),
      dispatcher: ep.dispatcher,
      signal: this.abort.signal,
      headersTimeout: ep.headersTimeoutMs,
      bodyTimeout: ep.bodyTimeoutMs,
    })
    if (res.statusCode !== 200 || !String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
      await res.body.dump()
      throw new ListenUnsupported(`subscriptions/listen answered ${res.statusCode} without a stream`)
    }
    const parser = new SseParser()
    for await (const chunk of res.body) {
      for (const data of parser.push(chunk as Buffer)) {
        const msg = parseJson(data)
        if (!isRecord(msg)) continue
        // A response to the listen itself is its graceful end (subscriptions.mdx §Ending).
        if ('result' in msg || 'error' in msg) return
        const params = isRecord(msg.params) ? msg.params : {}
        if (msg.method === 'notifications/subscriptions/acknowledged') {
          ack(isRecord(params.notifications) ? (params.notifications as ListenFilter) : {})
          continue
        }
        const what = invalidationOf(msg.method, params)
        if (what !== undefined) onChange(what)
      }
    }
  }
}

/** The cache entries a change notification makes stale. */
function invalidationOf(method: unknown, params: Readonly<Record<string, unknown>>): Invalidation | undefined {
  switch (method) {
    case 'notifications/tools/list_changed':
      return { kind: 'tools' }
    case 'notifications/prompts/list_changed':
      return { kind: 'prompts' }
    case 'notifications/resources/list_changed':
      return { kind: 'resources' }
    case 'notifications/resources/updated':
      return typeof params.uri === 'string' ? { kind: 'resource', uri: params.uri } : { kind: 'resources' }
    default:
      return undefined
  }
}

/** Minimal SSE reader (HTML §9.2.6): the `data` of each complete event; comments are skipped. */
export class SseParser {
  private pending = ''
  // A chunk may end inside a multi-byte character.
  private readonly decoder = new StringDecoder('utf8')

  push(chunk: Buffer): string[] {
    this.pending += this.decoder.write(chunk)
    const out: string[] = []
    for (;;) {
      const m = /\r\n\r\n|\n\n|\r\r/.exec(this.pending)
      if (m === null) break
      const event = this.pending.slice(0, m.index)
      this.pending = this.pending.slice(m.index + m[0].length)
      const data = event
        .split(/\r\n|\n|\r/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
      if (data.length > 0) out.push(data.join('\n'))
    }
    // SECURITY: a backend that never ends an event cannot grow this buffer without bound.
    if (this.pending.length > MAX_EVENT_CHARS) throw new Error('listen event too large')
    return out
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
