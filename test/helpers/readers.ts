/**
 * How real MCP backends read a forwarded request, for the differential test
 * (test/security/differential.test.ts). Each reader decodes the body and the headers the way one
 * kind of backend does and says which method, targets and protocol version that backend would act
 * on, or that it would refuse the request before acting. The gateway's promise (docs/security.md)
 * is that every reading of a forwarded request names what the gateway judged.
 *
 * The readers are written from the public behaviour of their models, independently of the
 * gateway's own parser: the official TypeScript SDK server (`@modelcontextprotocol/server`:
 * TextDecoder, JSON.parse, body-primary era classification), Go's `encoding/json` (struct fields
 * matched case-insensitively with simple Unicode folding, last match wins, objects merged, `null`
 * ignored, lone surrogates replaced, trailing data after the first value ignored by
 * `json.Decoder`), a BOM- and charset-tolerant decoder, first-key-wins and last-key-wins parsers,
 * a JavaScript reader that builds objects by assignment (`__proto__` becomes the prototype), an
 * HTTP-to-stdio bridge that passes every line of the body on as a message, cJSON (first match,
 * ASCII case-insensitive, C strings), and a WSGI server, whose headers `Mcp_Name` and `Mcp-Name`
 * are one.
 */

/** The protocol revision whose requests mirror method and name into headers (SEP-2243). */
export const MODERN = '2026-07-28'
/** The `_meta` key carrying a request's protocol version (spec 2026-07-28 basic/index §_meta). */
const META_VERSION = 'io.modelcontextprotocol/protocolVersion'

/**
 * Client-to-server methods of 2026-07-28 (schema `ClientRequest`, `ClientNotification`, the tasks
 * extension) and of 2025-11-25, exact case. Anything else is unknown to a conformant backend.
 */
export const KNOWN_METHODS: ReadonlySet<string> = new Set([
  'server/discover',
  'tools/list',
  'tools/call',
  'prompts/list',
  'prompts/get',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'completion/complete',
  'subscriptions/listen',
  'tasks/get',
  'tasks/update',
  'tasks/cancel',
  'tasks/list',
  'tasks/result',
  'initialize',
  'ping',
  'logging/setLevel',
  'resources/subscribe',
  'resources/unsubscribe',
  'notifications/cancelled',
  'notifications/progress',
  'notifications/initialized',
  'notifications/roots/list_changed',
  'notifications/tasks/status',
])

/** What `Mcp-Name` mirrors, per method (spec 2026-07-28 streamable-http §Standard Headers). */
export const NAMED: Readonly<Record<string, 'tool' | 'prompt' | 'resource'>> = {
  'tools/call': 'tool',
  'prompts/get': 'prompt',
  'resources/read': 'resource',
}

type TargetKind = 'tool' | 'prompt' | 'resource'

/** Something a backend would act on: a tool or prompt name, or a resource URI. */
export interface Target {
  readonly kind: TargetKind
  readonly value: string
}

/** A request as the backend received it. */
export interface ForwardedRequest {
  /** [name, value, name, value, …] in wire order and case. */
  readonly rawHeaders: readonly string[]
  readonly body: Buffer
}

/** One JSON-RPC message as one reader understands it. */
interface MessageReading {
  readonly method: string | undefined
  readonly id: 'valid' | 'invalid' | 'absent'
  readonly jsonrpc: string | undefined
  /** `params._meta` carries the protocol-version key (whatever its value). */
  readonly hasClaim: boolean
  /** The protocol version `params._meta` names, when it is a string. */
  readonly claim: string | undefined
  /** For a method in {@link NAMED}: the body value `Mcp-Name` mirrors, when it is a string. */
  readonly named: string | undefined
  readonly targets: readonly Target[]
}

/** What one backend makes of a forwarded request. */
export interface Reading {
  readonly reader: ReaderName
  /** Why this backend would refuse the request before acting on it (undefined: it acts). */
  readonly refused?: string
  /** The messages it acts on (more than one only for a batch). */
  readonly messages: readonly MessageReading[]
  readonly batch: boolean
}

type ReaderName =
  'sdk' | 'go' | 'bom' | 'first-key' | 'last-key' | 'js-assign' | 'json-lines' | 'cjson' | 'wsgi'

/** Options of {@link readAll}. */
export interface ReadOptions {
  /**
   * The backend enforces HeaderMismatch (spec 2026-07-28 streamable-http §Server Validation) on
   * requests its reading classifies as 2026-07-28, as `trustHeaders: true` promises; a mismatch
   * is then a refusal. The SDK reader always applies the SDK's own checks, whatever this says.
   */
  readonly backendValidates: boolean
}

/** Every reader's reading of `req`. */
export function readAll(req: ForwardedRequest, opts: ReadOptions): Reading[] {
  const headers = headerView(req.rawHeaders)
  const cgi = cgiHeaderView(req.rawHeaders)
  const contentType = headers.first('content-type')
  const generic = opts.backendValidates ? validateModern : noValidation
  return [
    read(
      'sdk',
      () => JSON.parse(new TextDecoder().decode(req.body)) as unknown,
      fromJs,
      LAST,
      (m, batch) => validateSdk(m, headers, batch),
    ),
    read(
      'go',
      () => parseJson(utf8(req.body), { trailing: 'ignore' }),
      fromTree,
      GO,
      (m) => generic(m, headers),
    ),
    read(
      'bom',
      () => parseJson(decodeTolerant(req.body, contentType)),
      fromTree,
      LAST,
      (m) => generic(m, headers),
    ),
    read(
      'first-key',
      () => parseJson(utf8(req.body)),
      fromTree,
      FIRST,
      (m) => generic(m, headers),
    ),
    read(
      'last-key',
      () => parseJson(utf8(req.body)),
      fromTree,
      LAST,
      (m) => generic(m, headers),
    ),
    read(
      'js-assign',
      () => parseJson(utf8(req.body)),
      fromTree,
      PROTO,
      (m) => generic(m, headers),
    ),
    read(
      'json-lines',
      () => jsonLines(utf8(req.body)),
      fromTree,
      LAST,
      (m) => generic(m, headers),
    ),
    read(
      'cjson',
      () => parseJson(utf8(req.body)),
      fromTree,
      CJSON,
      (m) => generic(m, headers),
    ),
    read(
      'wsgi',
      () => JSON.parse(utf8(req.body)) as unknown,
      fromJs,
      LAST,
      (m) => generic(m, cgi),
    ),
  ]
}

function read(
  reader: ReaderName,
  parse: () => unknown,
  convert: (v: unknown) => JsonNode,
  view: View,
  validate: (m: MessageReading, batch: boolean) => string | undefined,
): Reading {
  let root: JsonNode
  try {
    root = convert(parse())
  } catch (err) {
    return { reader, refused: `unparseable: ${(err as Error).message}`, messages: [], batch: false }
  }
  const batch = root.t === 'arr'
  const elements = root.t === 'arr' ? root.items : [root]
  const messages: MessageReading[] = []
  for (const element of elements) {
    let message: MessageReading
    try {
      message = extract(view, element)
    } catch (err) {
      return { reader, refused: (err as Error).message, messages: [], batch }
    }
    const refused = validate(message, batch)
    if (refused !== undefined) return { reader, refused, messages: [], batch }
    messages.push(message)
  }
  if (batch && elements.length === 0) return { reader, refused: 'empty batch', messages, batch }
  return { reader, messages, batch }
}

// ---------------------------------------------------------------------------------------------
// A JSON tree that keeps every member, in order, so each reader can apply its own key rules.

export type JsonNode =
  | { readonly t: 'obj'; readonly members: readonly Member[] }
  | { readonly t: 'arr'; readonly items: readonly JsonNode[] }
  | { readonly t: 'str'; readonly v: string }
  | { readonly t: 'num'; readonly raw: string }
  | { readonly t: 'lit'; readonly v: boolean | null }

interface Member {
  readonly key: string
  readonly value: JsonNode
}

/**
 * Parses RFC 8259 JSON into a {@link JsonNode}: duplicates kept, escapes decoded (lone surrogates
 * stay as they are), numbers kept as written. `trailing: 'ignore'` reads the first value only, as
 * Go's `json.Decoder.Decode` does. Throws SyntaxError.
 */
export function parseJson(text: string, opts: { trailing?: 'reject' | 'ignore' } = {}): JsonNode {
  const p = { text, i: 0 }
  const value = parseValue(p, 0)
  skipWs(p)
  if (opts.trailing !== 'ignore' && p.i !== text.length) fail(p, 'trailing data')
  return value
}

interface Cursor {
  readonly text: string
  i: number
}

function fail(p: Cursor, what: string): never {
  throw new SyntaxError(`${what} at ${p.i}`)
}

function skipWs(p: Cursor): void {
  for (;;) {
    const c = p.text.charCodeAt(p.i)
    if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) p.i++
    else return
  }
}

function parseValue(p: Cursor, depth: number): JsonNode {
  if (depth > 256) fail(p, 'too deep')
  skipWs(p)
  const c = p.text[p.i]
  if (c === '{') return parseObject(p, depth)
  if (c === '[') return parseArray(p, depth)
  if (c === '"') return { t: 'str', v: parseString(p) }
  for (const [word, v] of [
    ['true', true],
    ['false', false],
    ['null', null],
  ] as const) {
    if (p.text.startsWith(word, p.i)) {
      p.i += word.length
      return { t: 'lit', v }
    }
  }
  const m = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/.exec(
    p.text.slice(p.i, p.i + 400),
  )
  if (m === null) fail(p, 'unexpected character')
  p.i += m[0].length
  return { t: 'num', raw: m[0] }
}

function parseObject(p: Cursor, depth: number): JsonNode {
  p.i++
  const members: Member[] = []
  skipWs(p)
  if (p.text[p.i] === '}') {
    p.i++
    return { t: 'obj', members }
  }
  for (;;) {
    skipWs(p)
    if (p.text[p.i] !== '"') fail(p, 'expected a key')
    const key = parseString(p)
    skipWs(p)
    if (p.text[p.i] !== ':') fail(p, 'expected ":"')
    p.i++
    members.push({ key, value: parseValue(p, depth + 1) })
    skipWs(p)
    const c = p.text[p.i++]
    if (c === '}') return { t: 'obj', members }
    if (c !== ',') fail(p, 'expected "," or "}"')
  }
}

function parseArray(p: Cursor, depth: number): JsonNode {
  p.i++
  const items: JsonNode[] = []
  skipWs(p)
  if (p.text[p.i] === ']') {
    p.i++
    return { t: 'arr', items }
  }
  for (;;) {
    items.push(parseValue(p, depth + 1))
    skipWs(p)
    const c = p.text[p.i++]
    if (c === ']') return { t: 'arr', items }
    if (c !== ',') fail(p, 'expected "," or "]"')
  }
}

const ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
}

function parseString(p: Cursor): string {
  p.i++
  let out = ''
  for (;;) {
    const c = p.text[p.i]
    if (c === undefined) fail(p, 'unterminated string')
    if (c === '"') {
      p.i++
      return out
    }
    if (c < ' ') fail(p, 'control character in string')
    if (c !== '\\') {
      out += c
      p.i++
      continue
    }
    const e = p.text[p.i + 1] ?? ''
    if (e === 'u') {
      const hex = p.text.slice(p.i + 2, p.i + 6)
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail(p, 'bad \\u escape')
      out += String.fromCharCode(parseInt(hex, 16))
      p.i += 6
      continue
    }
    const decoded = ESCAPES[e]
    if (decoded === undefined) fail(p, 'bad escape')
    out += decoded
    p.i += 2
  }
}

/** JSON.parse's result as a tree (it has already applied last-key-wins). */
function fromJs(v: unknown): JsonNode {
  if (v === null || typeof v === 'boolean') return { t: 'lit', v }
  if (typeof v === 'string') return { t: 'str', v }
  if (typeof v === 'number') return { t: 'num', raw: String(v) }
  if (Array.isArray(v)) return { t: 'arr', items: v.map(fromJs) }
  const obj = v as Record<string, unknown>
  return { t: 'obj', members: Object.keys(obj).map((key) => ({ key, value: fromJs(obj[key]) })) }
}

function fromTree(v: unknown): JsonNode {
  return v as JsonNode
}

/**
 * An HTTP-to-stdio bridge writes the body to a server's stdin, where every line is a message
 * (spec 2026-07-28 basic/transports/stdio): a body of several lines is several messages, read
 * here as a batch. A single line is the message itself.
 */
function jsonLines(text: string): JsonNode {
  // universal newlines, as Python's text streams split them
  const lines = text.split(/\r\n|\r|\n/).filter((l) => l.trim() !== '')
  if (lines.length === 1) return parseJson(lines[0] as string)
  return { t: 'arr', items: lines.map((l) => parseJson(l)) }
}

// ---------------------------------------------------------------------------------------------
// Key rules: how one reader finds a member.

/** `struct`: a field of a typed message (Go folds case there); `map`: a free-form object. */
type Position = 'struct' | 'map'

interface View {
  get(node: JsonNode | undefined, key: string, pos?: Position): JsonNode | undefined
  /** A string value; undefined when absent or of another type (a typed reader throws instead). */
  str(node: JsonNode | undefined): string | undefined
}

const members = (node: JsonNode | undefined): readonly Member[] =>
  node?.t === 'obj' ? node.members : []

const plainStr = (node: JsonNode | undefined): string | undefined =>
  node?.t === 'str' ? node.v : undefined

/** JSON.parse, and most hand-written parsers: the last duplicate wins. */
const LAST: View = {
  get: (node, key) => members(node).findLast((m) => m.key === key)?.value,
  str: plainStr,
}

/** Parsers that keep the first duplicate (some streaming and C parsers). */
const FIRST: View = {
  get: (node, key) => members(node).find((m) => m.key === key)?.value,
  str: plainStr,
}

/**
 * cJSON's `cJSON_GetObjectItem`, common in C servers: the first member whose key matches ASCII
 * case-insensitively, keys and values read as C strings (cut at the first NUL).
 */
const CJSON: View = {
  get(node, key) {
    const want = key.toLowerCase()
    return members(node).find(
      (m) => cString(m.key).replace(/[A-Z]/g, (c) => c.toLowerCase()) === want,
    )?.value
  },
  str: (node) => (node?.t === 'str' ? cString(node.v) : undefined),
}

function cString(s: string): string {
  const nul = s.indexOf('\u0000')
  return nul === -1 ? s : s.slice(0, nul)
}

/**
 * Objects built by assignment (`obj[key] = value`, Object.assign, naive merges): a `__proto__`
 * member sets the prototype, so a missing key is read from it.
 */
const PROTO: View = {
  get(node, key) {
    const all = members(node)
    const own = all.findLast((m) => m.key === key && key !== '__proto__')
    if (own !== undefined) return own.value
    const proto = all.findLast((m) => m.key === '__proto__' && m.value.t === 'obj')
    return proto === undefined ? undefined : PROTO.get(proto.value, key)
  },
  str: plainStr,
}

/**
 * Go `encoding/json` into typed structs: a key matches a field when equal under simple Unicode
 * case folding (bytes.EqualFold: `ſ` is `s`, the Kelvin sign is `k`), every match is applied in
 * order (so the last wins, and objects decoded into the same struct or map merge), `null` leaves
 * a field as it was, invalid UTF-16 becomes U+FFFD, and a value of the wrong type is an error.
 */
const GO: View = {
  get(node, key, pos = 'struct') {
    const want = pos === 'map' ? key : goFold(key)
    const found = members(node)
      .filter((m) => (pos === 'map' ? m.key : goFold(m.key)) === want)
      .map((m) => m.value)
      .filter((v) => !(v.t === 'lit' && v.v === null))
    const last = found.at(-1)
    if (last === undefined || last.t !== 'obj') return last
    // Decoding several objects into one struct or map: fields of earlier ones survive.
    const merged = found.filter((v) => v.t === 'obj').flatMap((v) => members(v))
    return { t: 'obj', members: merged }
  },
  str(node) {
    if (node === undefined) return undefined
    if (node.t !== 'str') throw new Error(`go: cannot unmarshal ${node.t} into a string field`)
    return wellFormed(node.v)
  },
}

/**
 * Go's `foldName` (`unicode.ToUpper(unicode.ToLower(r))` per rune, simple case mappings): ASCII
 * case, the four non-ASCII letters that fold onto ASCII ones (ſ → S, Kelvin sign → K, dotted and
 * dotless I → I), and every other letter onto its own upper case (`CITTÀ` is `città`, `Σ`, `σ`
 * and `ς` are one). JavaScript's mappings are the full ones: where one has several code points
 * the simple mapping keeps the rune, but for U+0130, whose simple lower case is `i`.
 */
function goFold(s: string): string {
  return wellFormed(s).replace(/[A-Za-z]|[^\0-\x7f]/gu, (r) => {
    const lower = r === '\u0130' ? 'i' : r.toLowerCase()
    const one = Array.from(lower).length === 1 ? lower : r
    const upper = one.toUpperCase()
    return Array.from(upper).length === 1 ? upper : one
  })
}

/** Lone surrogates replaced with U+FFFD, as Go and Rust decoders do. */
function wellFormed(s: string): string {
  return s.replace(
    /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
    '\ufffd',
  )
}

/**
 * How each reader finds a member of an object the backend decodes into a typed value (a struct
 * field for Go), for what a condition reads of the arguments (differential-conditions.test.ts).
 * `last-key` is what the gateway's JSON.parse, and so a condition, reads.
 */
export const MEMBER_READERS = {
  'last-key': (node: JsonNode | undefined, key: string) => LAST.get(node, key),
  'first-key': (node: JsonNode | undefined, key: string) => FIRST.get(node, key),
  go: (node: JsonNode | undefined, key: string) => GO.get(node, key, 'struct'),
  cjson: (node: JsonNode | undefined, key: string) => CJSON.get(node, key),
  'js-assign': (node: JsonNode | undefined, key: string) => PROTO.get(node, key),
} as const

// ---------------------------------------------------------------------------------------------
// What a message names.

function extract(view: View, root: JsonNode): MessageReading {
  if (root.t !== 'obj') throw new Error(`not a JSON-RPC message (${root.t})`)
  const method = view.str(view.get(root, 'method'))
  const idNode = view.get(root, 'id')
  const id =
    idNode === undefined
      ? 'absent'
      : idNode.t === 'str' || (idNode.t === 'num' && Number.isInteger(Number(idNode.raw)))
        ? 'valid'
        : 'invalid'
  const jsonrpc = plainStr(view.get(root, 'jsonrpc'))
  const params = view.get(root, 'params')
  const meta = view.get(params, '_meta')
  const hasClaim = meta?.t === 'obj' && view.get(meta, META_VERSION, 'map') !== undefined
  const claimNode = meta?.t === 'obj' ? view.get(meta, META_VERSION, 'map') : undefined
  const claim = claimNode?.t === 'str' ? claimNode.v : undefined
  const targets: Target[] = []
  let named: string | undefined
  const push = (kind: TargetKind, value: string | undefined): void => {
    if (value !== undefined) targets.push({ kind, value })
  }
  switch (method) {
    case 'tools/call':
    case 'prompts/get':
      named = view.str(view.get(params, 'name'))
      push(method === 'tools/call' ? 'tool' : 'prompt', named)
      break
    case 'resources/read':
      named = view.str(view.get(params, 'uri'))
      push('resource', named)
      break
    case 'resources/subscribe':
      push('resource', view.str(view.get(params, 'uri')))
      break
    case 'completion/complete': {
      const ref = view.get(params, 'ref')
      const type = view.str(view.get(ref, 'type'))
      if (type === 'ref/prompt') push('prompt', view.str(view.get(ref, 'name')))
      if (type === 'ref/resource') push('resource', view.str(view.get(ref, 'uri')))
      break
    }
    case 'subscriptions/listen': {
      const subs = view.get(view.get(params, 'notifications'), 'resourceSubscriptions')
      if (subs?.t === 'arr') for (const s of subs.items) push('resource', view.str(s))
      else if (subs !== undefined) view.str(subs) // a typed reader refuses a non-array
      break
    }
  }
  return { method, id, jsonrpc, hasClaim, claim, named, targets }
}

// ---------------------------------------------------------------------------------------------
// Header checks a backend applies before acting.

export interface HeaderView {
  /** Every value of a header, names matched case-insensitively, in wire order. */
  all(name: string): string[]
  first(name: string): string | undefined
}

export function headerView(raw: readonly string[]): HeaderView {
  const all = (name: string): string[] => {
    const out: string[] = []
    for (let i = 0; i < raw.length; i += 2) {
      if ((raw[i] as string).toLowerCase() === name) out.push(raw[i + 1] as string)
    }
    return out
  }
  return { all, first: (name) => all(name)[0] }
}

/**
 * Headers as CGI and WSGI servers hand them over (`HTTP_MCP_NAME`): `-` and `_` are the same
 * character, and a later header overwrites an earlier one of the same name.
 */
export function cgiHeaderView(raw: readonly string[]): HeaderView {
  const all = (name: string): string[] => {
    const want = name.replace(/_/g, '-')
    const out: string[] = []
    for (let i = 0; i < raw.length; i += 2) {
      if ((raw[i] as string).toLowerCase().replace(/_/g, '-') === want)
        out.push(raw[i + 1] as string)
    }
    return out
  }
  return { all, first: (name) => all(name).at(-1) }
}

function noValidation(): undefined {
  return undefined
}

/**
 * A conformant 2026-07-28 backend (the premise of `trustHeaders: true`): requests its reading
 * classifies as 2026-07-28 (by the header or the body's envelope) have every standard header,
 * and each one equals the body (spec 2026-07-28 streamable-http §Server Validation).
 */
function validateModern(m: MessageReading, headers: HeaderView): string | undefined {
  const version = headers.first('mcp-protocol-version')
  if (version !== MODERN && m.claim !== MODERN) return undefined
  if (version === undefined) return 'MCP-Protocol-Version absent on a 2026-07-28 request'
  if (m.hasClaim && m.claim !== version) return 'MCP-Protocol-Version differs from the body'
  return validateMethodAndName(m, headers)
}

/** The official SDK server's ladder (`classifyInboundRequest`, `validateStandardRequestHeaders`). */
function validateSdk(m: MessageReading, headers: HeaderView, batch: boolean): string | undefined {
  if (m.method === undefined) return 'sdk: no method'
  if (m.jsonrpc !== '2.0') return 'sdk: not JSON-RPC 2.0'
  if (m.id === 'invalid') return 'sdk: invalid id'
  const header = headers.first('mcp-protocol-version')?.trim()
  const headerModern = header !== undefined && header >= MODERN
  // A batch takes the 2025 path, whose transport refuses a 2026-07-28 header or element.
  if (batch) return m.hasClaim || headerModern ? 'sdk: 2026-07-28 batch' : undefined
  const method = headers.first('mcp-method')?.trim()
  if (m.id === 'absent') {
    // Notifications go to notification handlers only: `prompts/get` without an id runs nothing.
    if (!m.method.startsWith('notifications/')) return 'sdk: a notification runs no request handler'
    if (!m.hasClaim) {
      if (headerModern && method !== undefined && method !== m.method) return 'sdk: Mcp-Method'
      return undefined
    }
    if (m.claim === undefined) return 'sdk: bad envelope'
    if (header !== undefined && header !== m.claim) return 'sdk: version mismatch'
    if (m.claim >= MODERN && method !== undefined && method !== m.method) return 'sdk: Mcp-Method'
    return undefined
  }
  if (m.method === 'initialize' && m.claim === undefined) {
    return headerModern ? 'sdk: initialize with a modern header' : undefined
  }
  if (!m.hasClaim) return headerModern ? 'sdk: modern header without envelope' : undefined
  // The body claims an envelope: the modern route, which validates every standard header.
  if (m.claim === undefined) return 'sdk: bad envelope'
  if (header !== undefined && header !== m.claim) return 'sdk: version mismatch'
  if (method !== undefined && method !== m.method) return 'sdk: Mcp-Method mismatch'
  if (header === undefined) return 'sdk: MCP-Protocol-Version absent'
  return validateMethodAndName(m, headers)
}

function validateMethodAndName(m: MessageReading, headers: HeaderView): string | undefined {
  const method = headers.first('mcp-method')?.trim()
  if (method === undefined) {
    if (m.id !== 'absent') return 'Mcp-Method absent'
  } else if (method !== m.method) return 'Mcp-Method differs from the body'
  if (m.method === undefined || NAMED[m.method] === undefined) return undefined
  const name = headers.first('mcp-name')?.trim()
  if (name === undefined) return m.named === undefined ? undefined : 'Mcp-Name absent'
  const decoded = decodeMcpName(name)
  if (decoded === undefined) return 'Mcp-Name is not a valid value'
  if (m.named !== undefined && decoded !== m.named) return 'Mcp-Name differs from the body'
  return undefined
}

const SENTINEL = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/

/**
 * An `Mcp-Name` value as a backend decodes it (SEP-2243 §Encoding): the `=?base64?…?=` sentinel
 * is canonical base64 of UTF-8, anything else is taken as it is. Undefined when the sentinel is
 * malformed.
 */
export function decodeMcpName(value: string): string | undefined {
  if (!(value.startsWith('=?base64?') && value.endsWith('?='))) return value
  const b64 = SENTINEL.exec(value)?.[1]
  if (b64 === undefined || b64.length % 4 !== 0) return undefined
  const bytes = Buffer.from(b64, 'base64')
  if (bytes.toString('base64') !== b64) return undefined
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    return undefined
  }
}

// ---------------------------------------------------------------------------------------------
// Body decoding.

/** UTF-8 as most parsers take it: invalid bytes become U+FFFD, a BOM stays (and is not JSON). */
function utf8(body: Buffer): string {
  return new TextDecoder('utf-8', { ignoreBOM: true }).decode(body)
}

/**
 * A lenient reader: a UTF-8 BOM is skipped, UTF-16 is recognised by its BOM, or, without one, by
 * a `charset=utf-16*` parameter of Content-Type.
 */
function decodeTolerant(body: Buffer, contentType: string | undefined): string {
  if (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) return utf8(body.subarray(3))
  if (body[0] === 0xff && body[1] === 0xfe) return new TextDecoder('utf-16le').decode(body)
  if (body[0] === 0xfe && body[1] === 0xff) return new TextDecoder('utf-16be').decode(body)
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1]?.toLowerCase()
  if (charset === 'utf-16le') return new TextDecoder('utf-16le').decode(body)
  if (charset === 'utf-16be' || charset === 'utf-16') {
    return new TextDecoder('utf-16be').decode(body)
  }
  return utf8(body)
}

// ---------------------------------------------------------------------------------------------
// What a backend may act on, given a name or a URI.

/**
 * The names a backend may act on for `name`: the name itself, the name with control characters
 * (C0, DEL, C1) and bidi controls stripped (sanitising loggers, dispatchers and UIs do that), the
 * name cut at its first NUL (C strings), and the name with lone surrogates replaced.
 */
export function actedNames(name: string): string[] {
  const stripped = name.replace(/[\p{Cc}\p{Bidi_Control}]/gu, '')
  const nul = name.indexOf('\u0000')
  const out = new Set([name, stripped, wellFormed(name), wellFormed(stripped)])
  if (nul !== -1) out.add(name.slice(0, nul))
  return [...out]
}

/**
 * The URIs a backend may act on for `uri`: the URI itself, its WHATWG-normalised form (dot
 * segments resolved, `%2e` taken as `.`, `\` as `/` in special schemes), the path decoded once
 * (`%2F`, `%5C`, `%2E`, `%00`) with dot segments then resolved, as file servers do, and each of
 * these cut at a NUL.
 */
export function actedUris(uri: string): string[] {
  const out = new Set([uri])
  try {
    out.add(new URL(uri).href)
  } catch {
    // not a URL for WHATWG; the raw form stands
  }
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/\\]*/.exec(uri)?.[0]
  if (scheme !== undefined) {
    let path = uri.slice(scheme.length)
    try {
      path = decodeURIComponent(path)
    } catch {
      path = path.replace(/%(2[eEfF]|5[cC])/g, (_, h: string) =>
        String.fromCharCode(parseInt(h, 16)),
      )
    }
    out.add(scheme + resolveDots(path.replace(/\\/g, '/')))
  }
  // C file servers open the path as a C string: everything after a NUL is gone.
  return [...out].flatMap((u) => [u, cString(u)])
}

function resolveDots(path: string): string {
  const out: string[] = []
  const segments = path.split('/')
  for (const [i, seg] of segments.entries()) {
    if (seg === '..') {
      if (out.length > 1) out.pop()
      if (i === segments.length - 1) out.push('')
    } else if (seg === '.') {
      if (i === segments.length - 1) out.push('')
    } else out.push(seg)
  }
  return out.join('/')
}
