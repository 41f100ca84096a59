import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { request } from 'undici'

/** The modern protocol revision these helpers speak. */
export const MODERN_VERSION = '2026-07-28'

/** Options of {@link connectClient} and {@link connectLegacyClient}. */
export interface ConnectOptions {
  /** Bearer token, sent as `Authorization: Bearer <auth>` on every request. */
  readonly auth?: string
  /** Require 2026-07-28 (connect fails instead of falling back to 2025 initialize). */
  readonly pin?: boolean
  /** Extra headers on every request, e.g. Origin. */
  readonly headers?: Readonly<Record<string, string>>
  /** clientInfo.name (default 'test-client'). */
  readonly name?: string
  /** The client's capabilities (default: form elicitation; the v1 client's: elicitation). */
  readonly capabilities?: Readonly<Record<string, object>>
}

/**
 * Connects the official v2 client with version negotiation (auto, or pinned to 2026-07-28). It
 * declares form elicitation, so set `client.setRequestHandler('elicitation/create', …)` for MRTR.
 */
export async function connectClient(url: string, options: ConnectOptions = {}): Promise<Client> {
  const client = new Client(
    { name: options.name ?? 'test-client', version: '1.0.0' },
    {
      capabilities: options.capabilities ?? { elicitation: { form: {} } },
      versionNegotiation: { mode: options.pin === true ? { pin: MODERN_VERSION } : 'auto' },
    },
  )
  const auth = options.auth
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    ...(auth !== undefined && { authProvider: { token: () => Promise.resolve(auth) } }),
    ...(options.headers !== undefined && { requestInit: { headers: { ...options.headers } } }),
  })
  await client.connect(transport)
  return client
}

/** Connects the 2025-era SDK v1 client (initialize; Mcp-Session-Id if the server issues one). */
export async function connectLegacyClient(
  url: string,
  options: Omit<ConnectOptions, 'pin'> = {},
): Promise<V1Client> {
  const client = new V1Client(
    { name: options.name ?? 'test-legacy-client', version: '1.0.0' },
    { capabilities: options.capabilities ?? { elicitation: {} } },
  )
  const headers: Record<string, string> = { ...options.headers }
  if (options.auth !== undefined) headers['authorization'] = `Bearer ${options.auth}`
  await client.connect(new V1Transport(new URL(url), { requestInit: { headers } }))
  return client
}

/** A JSON-RPC message as read off the wire, loosely typed for assertions. */
interface RpcMessage {
  readonly jsonrpc?: string
  readonly id?: string | number | null
  readonly method?: string
  readonly params?: Record<string, unknown>
  readonly result?: Record<string, unknown>
  readonly error?: { readonly code: number; readonly message: string; readonly data?: unknown }
}

/** A fully read HTTP response. */
export interface RawResponse {
  readonly status: number
  /** Lower-case names; repeated headers come as arrays. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
  readonly text: string
  /** True when `timeoutMs` cut the body short (e.g. a listen stream that never ends). */
  readonly truncated: boolean
  /** The body parsed as JSON; throws when it is not JSON. */
  json(): unknown
  /** Every JSON-RPC message in the body, whether it is plain JSON or SSE `data:` frames. */
  messages(): RpcMessage[]
  /** The message that answers the request (has `result` or `error`); throws when there is none. */
  response(): RpcMessage
}

/** Options of {@link rawRequest}. */
export interface RawRequestOptions {
  readonly body?: string | object
  readonly headers?: Readonly<Record<string, string>>
  /** Stop reading after this long and return what arrived (default: read to the end). */
  readonly timeoutMs?: number
}

/** Sends exactly these headers and body with undici (no MCP logic at all). */
export async function rawRequest(
  method: 'GET' | 'POST' | 'DELETE' | 'PUT',
  url: string,
  { body, headers = {}, timeoutMs }: RawRequestOptions = {},
): Promise<RawResponse> {
  const abort = new AbortController()
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => abort.abort(), timeoutMs)
  try {
    const res = await request(url, {
      method,
      headers: { ...headers },
      signal: abort.signal,
      ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    })
    const chunks: Buffer[] = []
    let truncated = false
    try {
      for await (const chunk of res.body) chunks.push(chunk as Buffer)
    } catch (error) {
      if (!abort.signal.aborted) throw error
      truncated = true
    }
    return toRawResponse(
      res.statusCode,
      res.headers,
      Buffer.concat(chunks).toString('utf8'),
      truncated,
    )
  } finally {
    clearTimeout(timer)
  }
}

/** POSTs `body` (an object is JSON-encoded) with exactly `headers`. */
export function rawPost(
  url: string,
  body: string | object,
  headers: Readonly<Record<string, string>> = {},
  options: { readonly timeoutMs?: number } = {},
): Promise<RawResponse> {
  return rawRequest('POST', url, { body, headers, ...options })
}

/** Options of {@link mcpPost}. */
export interface McpPostOptions {
  readonly auth?: string
  /** Added to (and overriding) the headers {@link mcpHeaders} derives. */
  readonly headers?: Readonly<Record<string, string>>
  readonly id?: string | number
  readonly timeoutMs?: number
}

/** POSTs a well-formed modern request: envelope in the body, Mcp-Method and Mcp-Name to match. */
export function mcpPost(
  url: string,
  method: string,
  params: Record<string, unknown> = {},
  options: McpPostOptions = {},
): Promise<RawResponse> {
  const target = params['uri'] ?? params['name']
  const gated = ['tools/call', 'prompts/get', 'resources/read'].includes(method)
  const headers = {
    ...mcpHeaders(method, gated && typeof target === 'string' ? target : undefined),
    ...(options.auth !== undefined && { authorization: `Bearer ${options.auth}` }),
    ...options.headers,
  }
  const timeout = options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }
  return rawPost(url, mcpBody(method, params, options.id), headers, timeout)
}

/** The headers a 2026-07-28 client sends for `method` (and `name`, for Mcp-Name), lower-case. */
export function mcpHeaders(method: string, name?: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN_VERSION,
    'mcp-method': method,
    ...(name !== undefined && { 'mcp-name': encodeHeaderValue(name) }),
  }
}

/** The per-request `_meta` envelope keys of 2026-07-28; `overrides` are merged over them. */
export function envelope(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN_VERSION,
    'io.modelcontextprotocol/clientInfo': { name: 'raw-test', version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } },
    ...overrides,
  }
}

/** A 2025-11-25 `initialize` request, as a raw client (no SDK) sends it to open a session. */
export const LEGACY_INITIALIZE = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: {
    protocolVersion: '2025-11-25',
    capabilities: {},
    clientInfo: { name: 'raw', version: '1' },
  },
} as const

/** A JSON-RPC request body with the envelope merged into `params._meta`. */
export function mcpBody(
  method: string,
  params: Record<string, unknown> = {},
  id: string | number = 1,
): Record<string, unknown> {
  const meta = params['_meta']
  const extra = typeof meta === 'object' && meta !== null ? meta : {}
  return { jsonrpc: '2.0', id, method, params: { ...params, _meta: { ...envelope(), ...extra } } }
}

/**
 * SEP-2243 header value encoding: plain printable ASCII as is; anything else (non-ASCII, empty,
 * leading/trailing whitespace, sentinel look-alikes) as `=?base64?<UTF-8 base64>?=`.
 */
export function encodeHeaderValue(value: string): string {
  const plain =
    /^[\x20-\x7e]+$/.test(value) &&
    value.trim() === value &&
    !(value.startsWith('=?') && value.endsWith('?='))
  return plain ? value : `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`
}

function toRawResponse(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  text: string,
  truncated: boolean,
): RawResponse {
  const messages = (): RpcMessage[] => {
    const isSse = String(headers['content-type'] ?? '').includes('text/event-stream')
    if (!isSse) {
      const parsed: unknown = JSON.parse(text)
      return (Array.isArray(parsed) ? parsed : [parsed]) as RpcMessage[]
    }
    const frames = text.split(/\r?\n\r?\n/)
    frames.pop() // whatever follows the last blank line is an unfinished frame (or nothing)
    return frames
      .map((frame) => frame.split(/\r?\n/).filter((l) => l.startsWith('data:')))
      .filter((data) => data.length > 0)
      .map((data) => JSON.parse(data.map((l) => l.slice(5).trimStart()).join('\n')) as RpcMessage)
  }
  return {
    status,
    headers,
    text,
    truncated,
    json: () => JSON.parse(text) as unknown,
    messages,
    response() {
      const found = messages().find((m) => m.result !== undefined || m.error !== undefined)
      if (found === undefined) throw new Error(`no JSON-RPC response in: ${text.slice(0, 200)}`)
      return found
    },
  }
}
