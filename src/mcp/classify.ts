import { GatewayError } from '../errors.js'
import type { ArgumentKeys } from './argument-keys.js'
import { decodeHeaderValue } from './headers.js'
import { checkEncoding, isRecord, parseMessage, type JsonRpcMessage } from './jsonrpc.js'
import {
  EVENT_NAME_METHODS,
  NAME_PARAMS,
  NAMED_METHODS,
  URI_TARGETS,
  type NamedKind,
} from './methods.js'
import { hasForbiddenNameCharacter, printable } from './names.js'
import { LEGACY_VERSIONS, MODERN_VERSION } from './protocol.js'
import type { RequestHead } from './request-head.js'

const META_VERSION = 'io.modelcontextprotocol/protocolVersion'

/**
 * Something a request names, which policy can allow or deny. `method` is a method a server lists
 * under `extraMethods`; the authorize stage names it, classify never does. A skill is named by the
 * URI of its SKILL.md, its identity within a server (skills.mdx §Skill URIs). A resource read as
 * a directory (`resources/directory/read`) says so: the directory's own SKILL.md is one of the
 * skills whose rules govern it (docs/policy.md §Skills).
 */
export type McpTarget =
  | { readonly kind: 'tool'; readonly name: string }
  | { readonly kind: 'prompt'; readonly name: string }
  | { readonly kind: 'resource'; readonly uri: string; readonly directory?: true }
  | { readonly kind: 'event'; readonly name: string }
  | { readonly kind: 'skill'; readonly name: string }
  | { readonly kind: 'method'; readonly name: string }

/** One inbound MCP message, as far as routing, policy and caching need to know it. */
export interface McpRequestInfo {
  readonly era: 'modern' | 'legacy'
  /** Protocol version from the header, or undefined for a header-less legacy client. */
  readonly version: string | undefined
  /** JSON-RPC method: from the body when parsed, else from the (trusted) Mcp-Method header. */
  readonly method: string | undefined
  readonly kind: 'request' | 'notification' | 'response' | 'unknown'
  /** Everything the request names: the Mcp-Name target, completion refs, listen URIs. */
  readonly targets: readonly McpTarget[]
  /** True when the body was parsed and agrees with every header that was sent. */
  readonly verified: boolean
  readonly message: JsonRpcMessage | undefined
}

/** What the server's config says about reading bodies (compiled once per server). */
export interface ClassifyPolicy {
  /** Parse every body: the backend does not enforce HeaderMismatch itself (`trustHeaders: false`). */
  readonly parseAlways: boolean
  /** Methods whose body a gateway feature needs even from a trusted backend (policy, cache key). */
  readonly parseMethods: ReadonlySet<string>
  readonly allowLegacy: boolean
  readonly maxDepth: number
  /**
   * Refuse keys another reader could read differently at every depth of a parsed body, not only
   * where the gateway decides (strict-json.ts `allKeys`): a policy condition judges arguments.
   */
  readonly judgesArguments: boolean
  /**
   * The argument keys the server's conditions read (argument-keys.ts): at every level they read,
   * a key another reader takes for one of them is refused, alone too (strict-json.ts `reads`).
   */
  readonly argumentKeys?: ArgumentKeys | undefined
}

/**
 * Classifies a request from its headers, and from its body where a decision is only safe after
 * reading it (streamable-http.mdx §Server Validation: intermediaries that act on mirrored headers
 * SHOULD refuse versions that don't require header-body validation). Throws GatewayError.
 */
export function classify(
  head: RequestHead,
  body: Uint8Array,
  policy: ClassifyPolicy,
): McpRequestInfo {
  const version = head.version
  if (version === MODERN_VERSION) return classifyModern(head, body, policy)
  if (version === undefined || LEGACY_VERSIONS.has(version))
    return classifyLegacy(head, body, policy)
  throw new GatewayError('unsupported_version', {
    detail: version,
    data: {
      supported: policy.allowLegacy ? [MODERN_VERSION, ...LEGACY_VERSIONS] : [MODERN_VERSION],
      requested: version,
    },
  })
}

function classifyModern(
  head: RequestHead,
  body: Uint8Array,
  policy: ClassifyPolicy,
): McpRequestInfo {
  const method = head.method
  const named = method === undefined ? undefined : NAMED_METHODS.get(method)
  const headerName = mcpNameOf(head)
  if (named !== undefined && headerName === undefined) {
    throw mismatch(`the required Mcp-Name header is absent for ${method}`)
  }
  // A modern POST without Mcp-Method can only be a notification (headers for those are undefined
  // by this revision); the body tells, so it is read.
  const mustParse = policy.parseAlways || method === undefined || policy.parseMethods.has(method)
  if (!mustParse) {
    // SECURITY: unparsed, but never in a form another reader decodes differently (BOM, UTF-16,
    // charset), and never a batch: that is no 2026-07-28 message, and a backend that serves
    // batches on another path would run elements whose headers nobody compared.
    checkEncoding(body, head.contentType)
    if (startsArray(body)) throw new GatewayError('batch_not_supported')
    const targets = named === undefined ? [] : [targetOf(named, headerName as string)]
    return {
      era: 'modern',
      version: MODERN_VERSION,
      method,
      kind: 'unknown',
      targets,
      verified: false,
      message: undefined,
    }
  }
  const msg = parseUnder(policy, head, body)
  if (msg.kind === 'response')
    throw new GatewayError('invalid_request', `clients do not send responses in ${MODERN_VERSION}`)
  if (method === undefined && msg.kind === 'request') {
    throw mismatch(
      `the body names method ${msg.method} but the required Mcp-Method header is absent`,
    )
  }
  if (method !== undefined && msg.method !== method) {
    throw mismatch(`the body names method ${msg.method} but the Mcp-Method header names ${method}`)
  }
  const claimed = metaVersion(msg)
  if (claimed !== undefined && claimed !== MODERN_VERSION) {
    throw mismatch(
      `the body envelope names protocol version ${claimed} but the MCP-Protocol-Version header names ${MODERN_VERSION}`,
    )
  }
  const targets = bodyTargets(msg, headerName, 'modern')
  return {
    era: 'modern',
    version: MODERN_VERSION,
    method: msg.method,
    kind: msg.kind,
    targets,
    verified: true,
    message: msg,
  }
}

/** A body parsed as this server's policy says: depth, charset, and the key rules of conditions. */
function parseUnder(policy: ClassifyPolicy, head: RequestHead, body: Uint8Array): JsonRpcMessage {
  return parseMessage(
    body,
    policy.maxDepth,
    head.contentType,
    policy.judgesArguments,
    policy.argumentKeys,
  )
}

function classifyLegacy(
  head: RequestHead,
  body: Uint8Array,
  policy: ClassifyPolicy,
): McpRequestInfo {
  const msg = parseUnder(policy, head, body)
  const claimed = metaVersion(msg)
  if (claimed !== undefined && !LEGACY_VERSIONS.has(claimed)) {
    throw mismatch(
      head.version === undefined
        ? `the body envelope names protocol version ${claimed} but the required MCP-Protocol-Version header is absent`
        : `the body envelope names protocol version ${claimed} but the MCP-Protocol-Version header names ${head.version}`,
    )
  }
  if (!policy.allowLegacy) {
    throw new GatewayError('legacy_not_allowed', {
      data: {
        supported: [MODERN_VERSION],
        ...(head.version === undefined ? {} : { requested: head.version }),
      },
    })
  }
  // 2025-era clients send no routing headers; any that are present must still agree with the body.
  if (head.method !== undefined && head.method !== msg.method) {
    throw mismatch(
      `the body names method ${msg.method} but the Mcp-Method header names ${head.method}`,
    )
  }
  const targets = msg.kind === 'response' ? [] : bodyTargets(msg, mcpNameOf(head), 'legacy')
  return {
    era: 'legacy',
    version: head.version,
    method: msg.method,
    kind: msg.kind,
    targets,
    verified: true,
    message: msg,
  }
}

/** The decoded Mcp-Name header (SEP-2243 §Encoding), undefined when absent; -32020 when invalid. */
function mcpNameOf(head: RequestHead): string | undefined {
  if (head.name === undefined) return undefined
  const name = decodeHeaderValue(head.name)
  if (name === undefined) throw mismatch('the Mcp-Name header is not a valid value')
  return name
}

/**
 * Every target a parsed body names: the Mcp-Name target (a sent Mcp-Name must equal the body's
 * name byte for byte), completion refs, listen URIs and the URI of a 2025-era resources/subscribe.
 */
function bodyTargets(
  msg: JsonRpcMessage,
  headerName: string | undefined,
  era: 'modern' | 'legacy',
): McpTarget[] {
  const method = msg.method ?? ''
  const params = msg.params
  const named = NAME_PARAMS.get(method)
  if (named !== undefined && named.kind !== 'event') {
    const { kind, field } = named
    const value = params?.[field]
    if (typeof value !== 'string') {
      if (headerName !== undefined) {
        throw mismatch(
          `the Mcp-Name header names "${headerName}" but the body carries no params.${field}`,
        )
      }
      throw new GatewayError('invalid_params', `${method} requires params.${field} as a string`)
    }
    // SECURITY: exact comparison after decoding; no case folding or normalisation (SEP-2243).
    if (headerName !== undefined && headerName !== value) {
      throw mismatch(
        `the body carries params.${field}=${JSON.stringify(value)} but the Mcp-Name header names ${JSON.stringify(headerName)}`,
      )
    }
    return [targetOf(kind, value)]
  }
  if (EVENT_NAME_METHODS.has(method)) return eventTargets(method, params, headerName)
  const uriTarget = URI_TARGETS.get(method)
  if (uriTarget !== undefined) return uriTargets(method, uriTarget, params, headerName)
  if (method === 'completion/complete') return refTargets(params)
  // Each revision has only one of these two; the other era's is an unknown method (authorize).
  if (method === 'subscriptions/listen' && era === 'modern') return listenTargets(params)
  if (method === 'resources/subscribe' && era === 'legacy') return subscribeTargets(params)
  return []
}

/**
 * The event type an events/* request names (SEP-3415: `params.name`). The extension does not
 * mirror it into Mcp-Name, so it is always read from the body; a client that sends Mcp-Name anyway
 * must send the same name.
 */
function eventTargets(
  method: string,
  params: Readonly<Record<string, unknown>> | undefined,
  headerName: string | undefined,
): McpTarget[] {
  const name = params?.name
  // SECURITY: no name, no judgement: a request the policy cannot judge is refused, not forwarded.
  if (typeof name !== 'string')
    throw new GatewayError('invalid_params', `${method} requires params.name as a string`)
  if (headerName !== undefined && headerName !== name) {
    throw mismatch(
      `the body carries params.name=${JSON.stringify(name)} but the Mcp-Name header names ${JSON.stringify(headerName)}`,
    )
  }
  return [targetOf('event', name)]
}

/**
 * The skill or directory a skills-extension request names in `params.uri` (skills.mdx §Getting a
 * Skill, §Reading Directories), read from the body as no header mirrors it; a client that sends
 * Mcp-Name anyway must send the same URI.
 */
function uriTargets(
  method: string,
  kind: 'skill' | 'directory',
  params: Readonly<Record<string, unknown>> | undefined,
  headerName: string | undefined,
): McpTarget[] {
  const uri = params?.uri
  // SECURITY: no URI, no judgement: a request the policy cannot judge is refused, not forwarded.
  if (typeof uri !== 'string')
    throw new GatewayError('invalid_params', `${method} requires params.uri as a string`)
  if (headerName !== undefined && headerName !== uri) {
    throw mismatch(
      `the body carries params.uri=${JSON.stringify(uri)} but the Mcp-Name header names ${JSON.stringify(headerName)}`,
    )
  }
  return [kind === 'skill' ? { kind, name: uri } : { kind: 'resource', uri, directory: true }]
}

function refTargets(params: Readonly<Record<string, unknown>> | undefined): McpTarget[] {
  const ref = params?.ref
  if (!isRecord(ref)) return []
  if (ref.type === 'ref/prompt' && typeof ref.name === 'string')
    return [targetOf('prompt', ref.name)]
  if (ref.type === 'ref/resource' && typeof ref.uri === 'string')
    return [{ kind: 'resource', uri: ref.uri }]
  throw new GatewayError(
    'invalid_params',
    'completion/complete needs a ref/prompt name or ref/resource uri',
  )
}

function listenTargets(params: Readonly<Record<string, unknown>> | undefined): McpTarget[] {
  const n = params?.notifications
  if (!isRecord(n) || n.resourceSubscriptions === undefined) return []
  const uris = n.resourceSubscriptions
  if (!Array.isArray(uris) || !uris.every((u) => typeof u === 'string')) {
    throw new GatewayError('invalid_params', 'resourceSubscriptions must be an array of strings')
  }
  return uris.map((uri: string) => ({ kind: 'resource', uri }))
}

/** A 2025-era resources/subscribe names a resource in params.uri (2025-11-25 server/resources). */
function subscribeTargets(params: Readonly<Record<string, unknown>> | undefined): McpTarget[] {
  const uri = params?.uri
  if (typeof uri !== 'string') {
    throw new GatewayError('invalid_params', 'resources/subscribe requires params.uri as a string')
  }
  return [{ kind: 'resource', uri }]
}

/**
 * Builds the target a named method designates. Tool and prompt names are checked here, whether
 * they come from a body or a decoded Mcp-Name, so no path skips the check.
 */
function targetOf(kind: NamedKind | 'event', value: string): McpTarget {
  if (kind === 'resource') return { kind, uri: value }
  // SECURITY: a name with controls, lone surrogates or bidi controls reads differently to another
  // decoder, log viewer or person; it is never judged or forwarded (docs/policy.md §What is refused).
  if (hasForbiddenNameCharacter(value)) {
    throw new GatewayError(
      'invalid_name',
      `the ${kind} name "${printable(value)}" contains a control, bidi or unpaired surrogate character`,
    )
  }
  return { kind, name: value }
}

/** True when the first byte after JSON whitespace is `[`. */
function startsArray(body: Uint8Array): boolean {
  for (const b of body) {
    if (b !== 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d) return b === 0x5b
  }
  return false
}

function metaVersion(msg: JsonRpcMessage): string | undefined {
  const meta = msg.params?._meta
  if (!isRecord(meta)) return undefined
  const v = meta[META_VERSION]
  return typeof v === 'string' ? v : undefined
}

function mismatch(detail: string): GatewayError {
  return new GatewayError('header_mismatch', detail)
}
