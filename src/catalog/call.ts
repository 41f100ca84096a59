import { GatewayError } from '../errors.js'
import { encodeHeaderValue } from '../mcp/headers.js'
import type { McpTarget } from '../mcp/classify.js'
import type { JsonRpcMessage } from '../mcp/jsonrpc.js'
import { NAME_PARAMS } from '../mcp/methods.js'
import { replaceParam } from '../mcp/rewrite.js'
import type { ServerCatalog } from './curate.js'
import type { CatalogKind } from './definition.js'

/** The tool or prompt name one request names, and where it sits. */
export interface CallName {
  readonly kind: CatalogKind
  readonly target: 'tool' | 'prompt'
  /** The client's name. */
  readonly exposed: string
  /** Its place under `params`. */
  readonly path: readonly string[]
  /** Whether `Mcp-Name` carries it (SEP-2243: tools/call and prompts/get, never completions). */
  readonly header: boolean
}

/** The name a tools/call, prompts/get or prompt completion names (classify's verified target). */
export function callNameOf(
  method: string | undefined,
  targets: readonly McpTarget[],
): CallName | undefined {
  const t = targets[0]
  if (t === undefined || (t.kind !== 'tool' && t.kind !== 'prompt')) return undefined
  const kind = t.kind === 'tool' ? 'tools' : 'prompts'
  // The method that names this kind in Mcp-Name (tools/call, prompts/get), at its own place.
  const named = method === undefined ? undefined : NAME_PARAMS.get(method)
  if (named?.kind === t.kind)
    return { kind, target: t.kind, exposed: t.name, path: [named.field], header: true }
  if (method === 'completion/complete' && t.kind === 'prompt')
    return { kind, target: t.kind, exposed: t.name, path: ['ref', 'name'], header: false }
  return undefined
}

/** What a call reaches: the backend's name, or why the name is unknown to clients. */
export type CallVerdict =
  { readonly backend: string } | { readonly refused: 'curated' | 'drifted' | 'unpinned' | 'unseen' }

/**
 * The backend name a client's name reaches, judged by the curation (renamed-away and hidden names
 * are unknown) and the pins (a definition that drifted, or that the lock does not name, is unknown
 * under onDrift/newTools: hide; one no list has shown yet is `unseen`).
 */
export function decideCall(catalog: ServerCatalog, call: CallName): CallVerdict {
  const backend = catalog.resolve(call.kind, call.exposed)
  if (backend === undefined) return { refused: 'curated' }
  const pins = catalog.pins
  if (pins === undefined) return { backend }
  const state = pins.callable(call.kind, backend)
  if (state === 'yes') return { backend }
  if (state === 'unseen') return { refused: 'unseen' }
  return { refused: pins.pin(call.kind, backend) === undefined ? 'unpinned' : 'drifted' }
}

/** The request as the backend receives it: its own name in the body and in `Mcp-Name`. */
interface RewrittenCall {
  readonly body: Buffer
  readonly message: JsonRpcMessage
  readonly targets: readonly McpTarget[]
}

/**
 * Replaces the one name in the raw body (mcp/rewrite.ts: every other byte stays the client's,
 * the id included). SECURITY: a name that is missing or written twice at that path is refused,
 * never guessed at, so the backend runs the name the gateway judged.
 */
export function rewriteCall(
  body: Buffer,
  message: JsonRpcMessage,
  call: CallName,
  backend: string,
): RewrittenCall {
  const text = replaceParam(body.toString('utf8'), call.path, backend)
  if (text === undefined) throw new GatewayError('invalid_params', 'ambiguous params')
  const params = message.params ?? {}
  const ref = params.ref as Readonly<Record<string, unknown>> | undefined
  const changed =
    call.path.length === 1
      ? { ...params, name: backend }
      : { ...params, ref: { ...ref, name: backend } }
  return {
    body: Buffer.from(text, 'utf8'),
    message: { ...message, params: changed },
    targets: [{ kind: call.target, name: backend }],
  }
}

/** `forward` with its `Mcp-Name` value replaced by `name` (SEP-2243 §Encoding). */
export function withMcpName(forward: readonly string[], name: string): string[] {
  const out = [...forward]
  for (let i = 0; i < out.length; i += 2)
    if ((out[i] as string).toLowerCase() === 'mcp-name') out[i + 1] = encodeHeaderValue(name)
  return out
}
