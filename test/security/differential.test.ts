import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { Agent, request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  envelope,
  LEGACY_INITIALIZE,
  mcpHeaders,
  rawPost,
  type RawResponse,
} from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import {
  KNOWN_METHODS,
  MODERN,
  NAMED,
  actedNames,
  actedUris,
  cgiHeaderView,
  decodeMcpName,
  headerView,
  readAll,
  type Reading,
  type Target,
} from '../helpers/readers.js'
import {
  startRecordingBackend,
  type ReceivedRequest,
  type RecordingBackend,
} from '../helpers/recording-backend.js'
import { startSdkServer } from '../helpers/sdk-servers.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'

/**
 * The differential property behind docs/security.md: for every request the gateway forwards, every
 * way a real backend reads it (test/helpers/readers.ts: the official SDK server, a Go-style
 * case-insensitive decoder, a BOM-tolerant one, first-key-wins, last-key-wins, assignment-built JS
 * objects) names the method, targets and protocol version the gateway judged, and nothing the
 * policy denies. Requests are generated adversarially (header/body disagreements, case-variant,
 * escaped, duplicate and `__proto__` keys, odd ids, control and bidi characters, Mcp-Name
 * encodings, Connection nominations, BOM and UTF-16 bodies, dot segments and encoded separators in
 * URIs) and sent through one gateway with two servers: `app` (trustHeaders: false) and `trusted`
 * (trustHeaders: true, whose backend is modelled as enforcing HeaderMismatch itself).
 *
 * Set MCP_EDGE_DIFF_SURVEY=1 to run the same cases without stopping at the first failure and get a
 * table of every violation class with its shortest example.
 */

const SEED = Number(process.env.MCP_EDGE_DIFF_SEED ?? 20261130)
const RUNS = Number(process.env.MCP_EDGE_DIFF_RUNS ?? 2000)
const SERVERS = ['app', 'trusted'] as const
type Server = (typeof SERVERS)[number]

const POLICY = `rules:
  - name: app-reads
    servers: [app, trusted]
    allow:
      tools: ["get_*"]
      prompts: [greet]
      resources: ["file:///projects/app/*"]
  - name: no-secrets
    servers: [app, trusted]
    deny:
      tools: ["get_secret*"]
      resources: ["*.env"]
`

/** The policy above, applied to what a backend may act on (readers.ts actedNames/actedUris). */
function allowed(t: Target): boolean {
  if (t.kind === 'tool') {
    return actedNames(t.value).every((n) => n.startsWith('get_') && !n.startsWith('get_secret'))
  }
  if (t.kind === 'prompt') return actedNames(t.value).every((n) => n === 'greet')
  return actedUris(t.value).every(
    (u) => u.startsWith('file:///projects/app/') && !u.endsWith('.env'),
  )
}

// ---------------------------------------------------------------------------------------------
// Generated requests

const TOOLS_OK = ['get_forecast', 'get_alerts']
const TOOLS_DENIED = ['delete_station', 'get_secret', 'Get_forecast', 'get_secret_key']
const TOOLS_TRICKY = [
  'get_\u200fsecret',
  'get_sec\u0007ret',
  'get_\u0000secret',
  'get_forecast\u0000',
  'get_forecast\u0085',
  'get_\u202eterces',
  'get_x\ud800',
  'get_\u009bsecret',
  'get_forecast\u007f',
  'get_\u2066secret\u2069',
  'get_forecast\u001b[2J',
]
const PROMPTS = ['greet', 'admin', 'Greet', 'greet\u0000', 'gr\u200eeet']
const URIS_OK = ['file:///projects/app/readme.md', 'file:///projects/app/src/main.ts']
const URIS_DENIED = [
  'file:///etc/passwd',
  'file:///projects/other/x',
  'FILE:///projects/app/x',
  'file:///projects/app/.env',
]
const URIS_TRICKY = [
  'file:///projects/app/../../etc/passwd',
  'file:///projects/app/%2e%2e/%2e%2e/etc/passwd',
  'file:///projects/app/%2E%2E/secret',
  'file:///projects/app/..%2F..%2Fetc%2Fpasswd',
  'file:///projects/app/..%2f..%2fetc/passwd',
  'file:///projects/app/..\\..\\etc\\passwd',
  'file:///projects/app/..%5C..%5Cetc%5Cpasswd',
  'file:///projects/app/.%2e/secret',
  'file:///projects/app/./readme.md',
  'file:///projects/app/sub/../readme.md',
  'file:///projects/app/%252e%252e/secret',
  'file:///projects/app/..;/..;/etc/passwd',
  'file:///projects/app/.env\u0000.txt',
  'file:///projects/app/.env%00.txt',
]
const TEMPLATE = 'file:///projects/app/{path}'

const NAMED_LIKE = ['x-vendor/exec', 'TOOLS/CALL', 'tools//call', 'Tools/call', 'tools/call ']
const ODD_IDS = [
  '9007199254740993',
  '-9007199254740993',
  '123456789012345678901234567890',
  '-0',
  '0',
  '1.5',
  '1e400',
  '1E2',
  '1.0',
  'true',
  'null',
  '{}',
  '[1]',
  '"\\u0000"',
  '"\\ud800"',
]
const NOMINATABLE = [
  'MCP-Protocol-Version',
  'mcp-protocol-version',
  'Mcp-Name',
  'Mcp-Method',
  'Content-Type',
  'X-Api-Key',
  'Host',
  'Content-Length',
  'Authorization',
  'Origin',
  'Mcp-Param-Region',
  'X-Custom',
  'Keep-Alive',
]

type At = 'top' | 'params' | 'ref' | 'notifications'
const SLOTS: readonly (readonly [At, string])[] = [
  ['top', 'method'],
  ['top', 'params'],
  ['top', 'id'],
  ['top', 'jsonrpc'],
  ['params', 'name'],
  ['params', 'uri'],
  ['params', 'ref'],
  ['params', 'notifications'],
  ['params', '_meta'],
  ['ref', 'type'],
  ['ref', 'name'],
  ['ref', 'uri'],
  ['notifications', 'resourceSubscriptions'],
]

/** One change to the body's JSON text at a position a backend decides on. */
interface Mutation {
  /** case: a case-variant key; dup: the same key again; escape: the key spelt with \u escapes;
   *  nul: the key followed by NUL (a C string equal to it); proto: a `__proto__` member carrying
   *  the key. Each carries a value naming a denied target. */
  readonly op: 'case' | 'dup' | 'escape' | 'nul' | 'proto'
  readonly at: At
  readonly key: string
  /** Picks the spelling (which case variant, which character escaped). */
  readonly spelling: number
  /** Next to the exact key, or instead of it. */
  readonly where: 'before' | 'after' | 'replace'
}

type Encoding = 'utf8' | 'utf8-bom' | 'utf16le-bom' | 'utf16be-bom' | 'utf16le' | 'invalid-utf8'
type NameHeader = 'match' | 'base64' | 'absent' | 'decoy' | 'bad-sentinel' | 'twice'

/** A generated request, in terms readable in a counterexample. */
interface Case {
  readonly method: string
  readonly tool: string
  readonly prompt: string
  readonly uri: string
  readonly ref: 'prompt' | 'resource'
  readonly subs: readonly string[]
  /** Raw JSON text of the id; undefined: a notification. */
  readonly id: string | undefined
  /** MCP-Protocol-Version header; undefined: absent; 'twice': 2026-07-28 and 2025-11-25. */
  readonly version: string | undefined
  /** The body's `_meta` protocol version: the header's when it is 2026-07-28, none, or a value. */
  readonly claim: string
  /** Mcp-Method header: the body's method, absent, or a value. */
  readonly mcpMethod: string
  readonly mcpName: NameHeader
  readonly headerCase: 'canonical' | 'lower' | 'upper'
  /** Connection header; `|` separates values sent as separate Connection lines. */
  readonly connection: string | undefined
  readonly contentType: string
  readonly encoding: Encoding
  /** Headers spelt with `_` for `-` (one name for CGI and WSGI servers), naming other values. */
  readonly aliases: boolean
  /** Client copies of the header the config sets upstream: [name, value, …]. */
  readonly apiKeys: readonly string[]
  /** String values written with \u escapes for `_`, `e`, and `\/` for `/`. */
  readonly escapeValues: boolean
  readonly batch: boolean
  /** A second message, naming a denied tool, on a line after the first. */
  readonly trailing: boolean
  readonly mutations: readonly Mutation[]
}

const pick = <T>(...weighted: [number, fc.Arbitrary<T>][]): fc.Arbitrary<T> =>
  fc.oneof(...weighted.map(([weight, arbitrary]) => ({ weight, arbitrary })))
const one = <T>(...values: T[]): fc.Arbitrary<T> => fc.constantFrom(...values)

const uriArb = pick([8, one(...URIS_OK)], [2, one(...URIS_DENIED)], [3, one(...URIS_TRICKY)])

/** What the request is about: always generated. */
const contentArb = fc.record({
  method: pick(
    [5, one('tools/call')],
    [2, one('prompts/get')],
    [3, one('resources/read')],
    [3, one('completion/complete')],
    [2, one('subscriptions/listen')],
    [2, one('tools/list')],
    [1, one('resources/subscribe')],
    [3, one(...NAMED_LIKE)],
  ),
  tool: pick([8, one(...TOOLS_OK)], [2, one(...TOOLS_DENIED)], [3, one(...TOOLS_TRICKY)]),
  prompt: pick([8, one('greet')], [2, one(...PROMPTS)]),
  uri: uriArb,
  ref: one('prompt' as const, 'resource' as const),
  subs: fc.array(uriArb, { minLength: 1, maxLength: 2 }),
  headerCase: one('canonical' as const, 'lower' as const, 'upper' as const),
})

/** How a request may deviate from a plain one; each case takes up to three of these. */
const deviationArb = fc.record({
  id: pick([3, one(...ODD_IDS)], [1, one<string | undefined>(undefined, '"req-1"')]),
  version: pick(
    [2, fc.constant(undefined)],
    [2, one('2025-11-25', '2025-06-18')],
    [1, one('2099-01-01', 'bad', 'twice')],
  ),
  claim: one('none', MODERN, '2025-11-25'),
  mcpMethod: one('absent', 'TOOLS/CALL', 'tools//call', 'tools/list', 'tools/call'),
  mcpName: one<NameHeader>('base64', 'absent', 'decoy', 'bad-sentinel', 'twice'),
  connection: pick(
    [1, one('keep-alive', 'close')],
    [
      4,
      fc
        .tuple(
          fc.subarray(NOMINATABLE, { minLength: 1, maxLength: 2 }),
          fc.boolean(),
          one(', ', '|'),
        )
        .map(([names, ka, sep]) => (ka ? ['keep-alive', ...names] : names).join(sep)),
    ],
  ),
  contentType: one(
    'application/json; charset=utf-8',
    'Application/JSON',
    'application/json; charset=utf-16le',
  ),
  encoding: one<Encoding>('utf8-bom', 'utf16le-bom', 'utf16be-bom', 'utf16le', 'invalid-utf8'),
  apiKeys: one<readonly string[]>(
    ['x-api-key', 'attacker'],
    ['X-API-KEY', 'attacker', 'x-api-key', 'attacker2'],
  ),
  aliases: fc.constant(true),
  escapeValues: fc.constant(true),
  batch: fc.constant(true),
  trailing: fc.constant(true),
  mutations: fc.array(
    fc
      .record({
        op: one(
          'case' as const,
          'dup' as const,
          'escape' as const,
          'nul' as const,
          'proto' as const,
        ),
        slot: one(...SLOTS),
        spelling: fc.nat(7),
        where: one('before' as const, 'after' as const, 'replace' as const),
      })
      .map(({ slot, ...m }): Mutation => ({ ...m, at: slot[0], key: slot[1] })),
    { minLength: 1, maxLength: 3 },
  ),
})

type Deviations = typeof deviationArb extends fc.Arbitrary<infer T> ? T : never
const DEVIATIONS: readonly (keyof Deviations)[] = [
  'id',
  'version',
  'claim',
  'mcpMethod',
  'mcpName',
  'connection',
  'contentType',
  'encoding',
  'apiKeys',
  'aliases',
  'escapeValues',
  'batch',
  'trailing',
  // body spellings are the richest deviation, so they are drawn more often
  'mutations',
  'mutations',
  'mutations',
]

/** A plain request about generated content, with up to three deviations from plain. */
const caseArb: fc.Arbitrary<Case> = fc
  .tuple(contentArb, deviationArb, fc.subarray([...DEVIATIONS], { maxLength: 3 }))
  .map(([content, wild, keys]) =>
    plain({ ...content, ...Object.fromEntries(keys.map((k) => [k, wild[k]])) }),
  )

/** A well-formed, allowed 2026-07-28 request; examples override what they attack. */
function plain(overrides: Partial<Case>): Case {
  return {
    method: 'tools/call',
    tool: 'get_forecast',
    prompt: 'greet',
    uri: 'file:///projects/app/readme.md',
    ref: 'prompt',
    subs: ['file:///projects/app/readme.md'],
    id: '1',
    version: MODERN,
    claim: 'match',
    mcpMethod: 'match',
    mcpName: 'match',
    headerCase: 'canonical',
    connection: undefined,
    contentType: 'application/json',
    encoding: 'utf8',
    apiKeys: [],
    aliases: false,
    escapeValues: false,
    batch: false,
    trailing: false,
    mutations: [],
    ...overrides,
  }
}

/** The bypasses seen in the review, kept as explicit examples. */
const SEEN: Case[] = [
  // trustHeaders: judged on Mcp-Name get_forecast, the version header dropped as hop-by-hop, the
  // SDK serves the envelope-less body on its 2025 path.
  plain({
    tool: 'delete_station',
    claim: 'none',
    mcpName: 'decoy',
    connection: 'MCP-Protocol-Version',
  }),
  // Connection: close, Mcp-Name forwarded the request without the header it was judged on.
  plain({ connection: 'close, Mcp-Name' }),
  // params.Ref naming a denied prompt: no decision here, Go's encoding/json reads it.
  plain({
    method: 'completion/complete',
    mutations: [{ op: 'case', at: 'params', key: 'ref', spelling: 0, where: 'replace' }],
  }),
  // Methods no conformant server knows, forwarded.
  plain({ method: 'TOOLS/CALL' }),
  plain({ method: 'tools//call' }),
  plain({ method: 'x-vendor/exec', tool: 'delete_station' }),
  // The backend received `x-api-key: attacker, gateway-secret`.
  plain({ apiKeys: ['x-api-key', 'attacker'] }),
  plain({ method: 'resources/read', uri: 'file:///projects/app/../../etc/passwd' }),
  plain({ tool: 'get_\u200fsecret' }),
  // Found by this test: on trustHeaders a batch went through unparsed, and a backend cannot check
  // one set of headers against several messages.
  plain({ batch: true, tool: 'delete_station', claim: 'none', mcpName: 'decoy' }),
  // Found by this test: a deciding key followed by NUL is the key itself to cJSON-style readers,
  // and a URI with a NUL (raw or %00) is cut there by C file servers.
  plain({
    method: 'completion/complete',
    mutations: [{ op: 'nul', at: 'params', key: 'ref', spelling: 0, where: 'before' }],
  }),
  plain({ method: 'resources/read', uri: 'file:///projects/app/.env%00.txt' }),
  plain({
    method: 'subscriptions/listen',
    mutations: [
      {
        op: 'case',
        at: 'notifications',
        key: 'resourceSubscriptions',
        spelling: 2,
        where: 'after',
      },
    ],
  }),
]

/** Requests every gateway must forward: if these stop arriving, the property proves nothing. */
function isPlain(c: Case): boolean {
  const clean = (() => {
    switch (kindOf(c.method)) {
      case 'tool':
        return c.method === 'tools/call' && TOOLS_OK.includes(c.tool)
      case 'prompt':
        return c.prompt === 'greet'
      case 'resource':
        return c.method === 'resources/read' && URIS_OK.includes(c.uri)
      case 'completion':
        return c.ref === 'prompt' ? c.prompt === 'greet' : URIS_OK.includes(c.uri)
      case 'listen':
        return c.subs.every((s) => URIS_OK.includes(s))
      case 'list':
        return true
    }
  })()
  return (
    clean &&
    (c.id === '1' || c.id === '7' || c.id === '"req-1"') &&
    c.version === MODERN &&
    c.claim === 'match' &&
    c.mcpMethod === 'match' &&
    (c.mcpName === 'match' || c.mcpName === 'base64') &&
    (c.connection === undefined || c.connection === 'keep-alive') &&
    c.contentType === 'application/json' &&
    c.encoding === 'utf8' &&
    c.apiKeys.length === 0 &&
    !c.aliases &&
    !c.escapeValues &&
    !c.batch &&
    !c.trailing &&
    c.mutations.length === 0
  )
}

// ---------------------------------------------------------------------------------------------
// From a case to bytes

type Kind = 'tool' | 'prompt' | 'resource' | 'completion' | 'listen' | 'list'

function kindOf(method: string): Kind {
  if (method === 'prompts/get') return 'prompt'
  if (method === 'resources/read' || method === 'resources/subscribe') return 'resource'
  if (method === 'completion/complete') return 'completion'
  if (method === 'subscriptions/listen') return 'listen'
  if (method === 'tools/list') return 'list'
  return 'tool'
}

/** JSON text as a tree whose keys are kept as written, so spellings and duplicates survive. */
type Ast =
  | { readonly k: 'obj'; readonly m: Entry[] }
  | { readonly k: 'arr'; readonly items: readonly Ast[] }
  | { readonly k: 'str'; readonly s: string }
  | { readonly k: 'raw'; readonly text: string }

interface Entry {
  /** The key as written in the JSON text, quotes included. */
  readonly text: string
  /** The key the builder meant (undefined for added members). */
  readonly key: string | undefined
  readonly v: Ast
}

const str = (s: string): Ast => ({ k: 'str', s })
const raw = (text: string): Ast => ({ k: 'raw', text })
const obj = (fields: Record<string, Ast>): Ast & { k: 'obj' } => ({
  k: 'obj',
  m: Object.entries(fields).map(([key, v]) => ({ text: JSON.stringify(key), key, v })),
})

function serialize(a: Ast, escape: boolean): string {
  switch (a.k) {
    case 'raw':
      return a.text
    case 'str':
      return jsonString(a.s, escape)
    case 'arr':
      return `[${a.items.map((i) => serialize(i, escape)).join(',')}]`
    case 'obj':
      return `{${a.m.map((e) => `${e.text}:${serialize(e.v, escape)}`).join(',')}}`
  }
}

const hex4 = (code: number): string => `\\u${code.toString(16).padStart(4, '0')}`

/** A JSON string literal; surrogates and controls always escaped, `_ e /` too when `escape`. */
function jsonString(s: string, escape: boolean): string {
  let out = '"'
  for (let i = 0; i < s.length; i++) {
    const ch = s[i] as string
    const code = s.charCodeAt(i)
    if (ch === '"' || ch === '\\') out += `\\${ch}`
    else if (code < 0x20 || (code >= 0xd800 && code <= 0xdfff)) out += hex4(code)
    else if (escape && ch === '/') out += '\\/'
    else if (escape && (ch === '_' || ch === 'e')) out += hex4(code)
    else out += ch
  }
  return `${out}"`
}

/** U+E000 in a value marks where the invalid-utf8 encoding puts a 0xFF byte. */
const MARK = '\ue000'

function bodyValue(c: Case, value: string): string {
  return c.encoding === 'invalid-utf8' ? value.slice(0, 4) + MARK + value.slice(4) : value
}

function claimOf(c: Case): string | undefined {
  if (c.claim === 'none') return undefined
  if (c.claim === 'match') return c.version === MODERN ? MODERN : undefined
  return c.claim
}

function metaOf(claim: string | undefined): Ast {
  return obj({
    ...(claim !== undefined && { 'io.modelcontextprotocol/protocolVersion': str(claim) }),
    'io.modelcontextprotocol/clientInfo': obj({ name: str('diff'), version: str('1') }),
    'io.modelcontextprotocol/clientCapabilities': obj({}),
  })
}

function buildAst(c: Case): Ast & { k: 'obj' } {
  const params: Record<string, Ast> = {}
  switch (kindOf(c.method)) {
    case 'tool':
      params['name'] = str(bodyValue(c, c.tool))
      params['arguments'] = obj({ city: str('Oslo') })
      break
    case 'prompt':
      params['name'] = str(bodyValue(c, c.prompt))
      params['arguments'] = obj({})
      break
    case 'resource':
      params['uri'] = str(bodyValue(c, c.uri))
      break
    case 'completion':
      params['ref'] =
        c.ref === 'prompt'
          ? obj({ type: str('ref/prompt'), name: str(bodyValue(c, c.prompt)) })
          : obj({
              type: str('ref/resource'),
              uri: str(bodyValue(c, c.uri === URIS_OK[0] ? TEMPLATE : c.uri)),
            })
      params['argument'] = obj({ name: str('path'), value: str('re') })
      break
    case 'listen':
      params['notifications'] = obj({
        toolsListChanged: raw('true'),
        resourceSubscriptions: { k: 'arr', items: c.subs.map((s) => str(bodyValue(c, s))) },
      })
      break
    case 'list':
      break
  }
  params['_meta'] = metaOf(claimOf(c))
  const root = obj({
    jsonrpc: str('2.0'),
    ...(c.id !== undefined && { id: raw(c.id) }),
    method: str(c.method),
    params: obj(params),
  })
  for (const m of c.mutations) mutate(root, m, c)
  return root
}

/** The message a `trailing` case hides on a second line. */
function smuggled(c: Case): Ast {
  return obj({
    jsonrpc: str('2.0'),
    id: raw('99'),
    method: str('tools/call'),
    params: obj({ name: str('delete_station'), arguments: obj({}), _meta: metaOf(claimOf(c)) }),
  })
}

function entryOf(o: Ast | undefined, key: string): Entry | undefined {
  return o?.k === 'obj' ? o.m.find((e) => e.key === key) : undefined
}

function objectAt(root: Ast & { k: 'obj' }, at: At): (Ast & { k: 'obj' }) | undefined {
  const params = entryOf(root, 'params')?.v
  const found =
    at === 'top'
      ? root
      : at === 'params'
        ? params
        : at === 'ref'
          ? entryOf(params, 'ref')?.v
          : entryOf(params, 'notifications')?.v
  return found?.k === 'obj' ? found : undefined
}

/** A value for `key` at `at` that names something the policy denies (or another method/era). */
function attackerValue(at: At, key: string, c: Case): Ast {
  const denied = c.method === 'prompts/get' ? 'admin' : 'delete_station'
  switch (`${at}.${key}`) {
    case 'top.method':
      return str(c.method === 'tools/call' ? 'prompts/get' : 'tools/call')
    case 'top.params':
      return obj({
        name: str(denied),
        uri: str('file:///etc/passwd'),
        ref: obj({ type: str('ref/prompt'), name: str('admin') }),
        notifications: obj({
          resourceSubscriptions: { k: 'arr', items: [str('file:///etc/passwd')] },
        }),
        arguments: obj({}),
        _meta: metaOf(claimOf(c)),
      })
    case 'top.id':
      return raw('2')
    case 'top.jsonrpc':
      return str('1.0')
    case 'params.name':
      return str(denied)
    case 'params.ref':
      return obj({ type: str('ref/prompt'), name: str('admin') })
    case 'params.notifications':
      return obj({ resourceSubscriptions: { k: 'arr', items: [str('file:///etc/passwd')] } })
    case 'params._meta':
      return metaOf(claimOf(c) === MODERN ? '2025-11-25' : MODERN)
    case 'ref.type':
      return str(c.ref === 'prompt' ? 'ref/resource' : 'ref/prompt')
    case 'ref.name':
      return str('admin')
    case 'notifications.resourceSubscriptions':
      return { k: 'arr', items: [str('file:///etc/passwd')] }
    default: // params.uri, ref.uri
      return str('file:///etc/passwd')
  }
}

/** Case variants, including the non-ASCII letters Go folds onto ASCII (ſ → s, K → k, ı → i). */
function caseVariant(key: string, n: number): string {
  const letter = key.search(/[a-z]/)
  const upperFirst = key.slice(0, letter) + key.charAt(letter).toUpperCase() + key.slice(letter + 1)
  const lastUpper = key.slice(0, -1) + key.slice(-1).toUpperCase()
  const longS = key.includes('s') ? key.replace('s', '\u017f') : lastUpper
  const dotless = key.includes('i') ? key.replace('i', '\u0131') : upperFirst
  return [upperFirst, key.toUpperCase(), longS, lastUpper, dotless][n % 5] as string
}

function escapedKey(key: string, n: number): string {
  const i = n % key.length
  return `"${key.slice(0, i)}${hex4(key.charCodeAt(i))}${key.slice(i + 1)}"`
}

function mutate(root: Ast & { k: 'obj' }, m: Mutation, c: Case): void {
  const target = objectAt(root, m.at)
  if (target === undefined) return
  const index = target.m.findIndex((e) => e.key === m.key)
  if (index === -1 && m.op !== 'proto') return
  const value = attackerValue(m.at, m.key, c)
  const text =
    m.op === 'case'
      ? JSON.stringify(caseVariant(m.key, m.spelling))
      : m.op === 'escape'
        ? escapedKey(m.key, m.spelling)
        : m.op === 'dup'
          ? JSON.stringify(m.key)
          : m.op === 'nul'
            ? JSON.stringify(`${m.key}\u0000${m.spelling % 2 === 0 ? '' : 'x'}`)
            : '"__proto__"'
  const added: Entry = {
    text,
    key: undefined,
    v: m.op === 'proto' ? obj({ [m.key]: value }) : value,
  }
  if (index === -1) target.m.push(added)
  else if (m.where === 'replace' && m.op !== 'dup') target.m.splice(index, 1, added)
  else target.m.splice(m.where === 'before' ? index : index + 1, 0, added)
}

function encode(text: string, encoding: Encoding): Buffer {
  const utf8 = Buffer.from(text, 'utf8')
  switch (encoding) {
    case 'utf8':
      return utf8
    case 'invalid-utf8': {
      const mark = Buffer.from(MARK, 'utf8')
      const at = utf8.indexOf(mark)
      return at === -1
        ? utf8
        : Buffer.concat([
            utf8.subarray(0, at),
            Buffer.from([0xff]),
            utf8.subarray(at + mark.length),
          ])
    }
    case 'utf8-bom':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8])
    case 'utf16le':
      return Buffer.from(text, 'utf16le')
    case 'utf16le-bom':
      return Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')])
    case 'utf16be-bom':
      return Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(text, 'utf16le').swap16()])
  }
}

const PLAIN_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/
const sentinel = (v: string): string => `=?base64?${Buffer.from(v, 'utf8').toString('base64')}?=`
const headerSafe = (v: string): string =>
  PLAIN_VALUE.test(v) && !(v.startsWith('=?') && v.endsWith('?=')) ? v : sentinel(v)

/** The value Mcp-Name mirrors for this case (what a client would send), if any. */
function nameOf(c: Case): string | undefined {
  switch (kindOf(c.method)) {
    case 'tool':
      return c.tool
    case 'prompt':
      return c.prompt
    case 'resource':
      return c.uri
    case 'completion':
      return c.ref === 'prompt' ? c.prompt : c.uri
    case 'listen':
      return c.subs[0]
    case 'list':
      return undefined
  }
}

/** An allowed value other than the body's, for a header that lies. */
function decoyOf(c: Case): string {
  const kind = kindOf(c.method)
  if (kind === 'prompt' || (kind === 'completion' && c.ref === 'prompt')) {
    return c.prompt === 'greet' ? 'Greet' : 'greet'
  }
  if (kind === 'resource' || kind === 'completion' || kind === 'listen') {
    return nameOf(c) === URIS_OK[0] ? (URIS_OK[1] as string) : (URIS_OK[0] as string)
  }
  return c.tool === 'get_forecast' ? 'get_alerts' : 'get_forecast'
}

function headerName(name: string, c: Case): string {
  return c.headerCase === 'lower'
    ? name.toLowerCase()
    : c.headerCase === 'upper'
      ? name.toUpperCase()
      : name
}

interface Built {
  readonly headers: string[]
  readonly body: Buffer
}

function build(c: Case, host: string): Built {
  const root = buildAst(c)
  let text = serialize(c.batch ? { k: 'arr', items: [root] } : root, c.escapeValues)
  if (c.trailing) text += `\r\n${serialize(smuggled(c), c.escapeValues)}`
  const body = encode(text, c.encoding)
  const h: string[] = ['Host', host, 'Content-Type', c.contentType]
  h.push('Accept', 'application/json, text/event-stream')
  const versionHeader = headerName('MCP-Protocol-Version', c)
  if (c.version === 'twice') h.push(versionHeader, MODERN, versionHeader, '2025-11-25')
  else if (c.version !== undefined) h.push(versionHeader, c.version)
  if (c.mcpMethod !== 'absent') {
    h.push(headerName('Mcp-Method', c), c.mcpMethod === 'match' ? c.method.trim() : c.mcpMethod)
  }
  const name = nameOf(c)
  const mcpName = headerName('Mcp-Name', c)
  switch (c.mcpName) {
    case 'match':
      if (name !== undefined) h.push(mcpName, headerSafe(name))
      break
    case 'base64':
      if (name !== undefined) h.push(mcpName, sentinel(name))
      break
    case 'decoy':
      h.push(mcpName, headerSafe(decoyOf(c)))
      break
    case 'bad-sentinel':
      h.push(mcpName, '=?base64?not*base64?=')
      break
    case 'twice':
      h.push(mcpName, headerSafe(decoyOf(c)), mcpName, headerSafe(name ?? 'get_forecast'))
      break
    case 'absent':
      break
  }
  for (const value of c.connection?.split('|') ?? []) h.push('Connection', value)
  h.push(...c.apiKeys, 'X-Custom', '1', 'Mcp-Param-Region', 'north')
  if (c.aliases) {
    h.push('Mcp_Name', 'delete_station', 'MCP_PROTOCOL_VERSION', '2025-11-25')
    h.push('Mcp_Method', 'tools/call', 'X_Api_Key', 'attacker')
  }
  h.push('Content-Length', String(body.length))
  return { headers: h, body }
}

// ---------------------------------------------------------------------------------------------
// The oracle

// Never in a tool or prompt name: controls (C0, DEL, C1), lone surrogates, bidi controls.
const UNCLEAN_NAME = /[\p{Cc}\p{Cs}\p{Bidi_Control}]/u
// A URI a resource rule is matched against must be in normal form (docs/policy.md).
const UNNORMAL_URI = /(^|[/\\])\.\.?([/\\?#]|$)|%2[eEfF]|%5[cC]|\\/

const show = (v: unknown): string => JSON.stringify(v)

/** Headers the gateway judged: the backend must get exactly the client's copies. */
const OWNED = ['mcp-protocol-version', 'mcp-method', 'mcp-name', 'content-type']

/** What a reading acts on: method, targets, and the version (the body's claim, else the header). */
function signature(r: Reading, version: string | undefined): string {
  return show(
    r.messages.map((m) => [m.method, m.targets.map((t) => [t.kind, t.value]), m.claim ?? version]),
  )
}

/** What is wrong with what the backend received for one request, as `class: detail` lines. */
function violations(server: Server, sent: Built, got: readonly ReceivedRequest[]): string[] {
  const out: string[] = []
  if (got.length > 1) out.push(`forwarded-twice: ${got.length} requests`)
  const sentH = headerView(sent.headers)
  for (const r of got) {
    const fwd = headerView(r.rawHeaders)
    for (const name of OWNED) {
      const before = sentH.all(name)
      const after = fwd.all(name)
      if (show(before) !== show(after)) {
        out.push(`header-changed: ${name} sent ${show(before)}, backend got ${show(after)}`)
      }
    }
    const key = fwd.all('x-api-key')
    if (show(key) !== show(['gateway-secret'])) {
      out.push(`configured-header: backend got x-api-key ${show(key)}`)
    }
    // A CGI or WSGI backend reads `Mcp_Name` as `Mcp-Name`: no alias may reach it.
    const cgi = cgiHeaderView(r.rawHeaders)
    for (const name of [...OWNED, 'x-api-key']) {
      if (show(cgi.all(name)) !== show(fwd.all(name))) {
        out.push(`header-aliased: ${name} reads ${show(cgi.all(name))} through a CGI server`)
      }
    }
    if (!r.body.equals(sent.body)) out.push('body-changed')
    const readings = readAll(r, { backendValidates: server === 'trusted' })
    const version = fwd.first('mcp-protocol-version')
    const method = fwd.first('mcp-method')
    const name = fwd.first('mcp-name')
    // Each finding once, with the readers it holds for: `class: detail (sdk, go, …)`.
    const found = new Map<string, string[]>()
    const note = (finding: string, who: string): void => {
      found.set(finding, [...(found.get(finding) ?? []), who])
    }
    for (const reading of readings) {
      if (reading.refused !== undefined) continue
      const who = reading.reader
      if (reading.batch) note('batch-forwarded: read as several messages', who)
      for (const m of reading.messages) {
        if (m.method !== undefined && !KNOWN_METHODS.has(m.method)) {
          note(`unknown-method: acts on ${show(m.method)}`, who)
        }
        for (const t of m.targets) {
          if (!allowed(t)) note(`denied-target: acts on ${t.kind} ${show(t.value)}`, who)
          if (t.kind !== 'resource' && UNCLEAN_NAME.test(t.value)) {
            note(`unclean-name: acts on ${t.kind} ${show(t.value)}`, who)
          }
          if (t.kind === 'resource' && UNNORMAL_URI.test(t.value)) {
            note(`uri-not-normal: acts on ${show(t.value)}`, who)
          }
        }
        if (method !== undefined && method !== m.method) {
          note(`mcp-method-disagrees: header ${show(method)}, body read as ${show(m.method)}`, who)
        }
        // A body without the name runs nothing; with one, it must be the name the header mirrors.
        if (m.named !== undefined && NAMED[m.method ?? ''] !== undefined && name !== undefined) {
          const decoded = decodeMcpName(name.trim())
          if (decoded !== m.named) {
            note(`mcp-name-disagrees: header ${show(decoded)}, body read as ${show(m.named)}`, who)
          }
        }
        if (m.hasClaim) {
          const claimModern = m.claim !== undefined && m.claim >= MODERN
          if (version === MODERN ? m.claim !== MODERN : claimModern) {
            note(`version-disagrees: header ${show(version)}, body read as ${show(m.claim)}`, who)
          }
        }
      }
    }
    for (const [finding, who] of found) out.push(`${finding} (${who.join(', ')})`)
    const acting = readings.filter((x) => x.refused === undefined)
    const bySignature = new Map<string, string[]>()
    for (const x of acting) {
      const sig = signature(x, version)
      bySignature.set(sig, [...(bySignature.get(sig) ?? []), x.reader])
    }
    if (bySignature.size > 1) {
      const each = [...bySignature].map(([sig, who]) => `${who.join(', ')}: ${sig}`)
      out.push(`readers-disagree: ${each.join(' | ')}`)
    }
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// The run

let backend: RecordingBackend
let gateway: TestGateway
let policyDir: string
let port: number
const agent = new Agent({ keepAlive: true, maxSockets: 4 })

beforeAll(async () => {
  policyDir = mkdtempSync(join(tmpdir(), 'mcp-edge-diff-'))
  writeFileSync(join(policyDir, 'policy.yaml'), POLICY)
  backend = await startRecordingBackend()
  const server = (path: string, trustHeaders: boolean): Record<string, unknown> => ({
    upstreams: [{ url: `${backend.origin}/${path}` }],
    trustHeaders,
    headers: { 'X-Api-Key': 'gateway-secret' },
  })
  gateway = await startTestGateway(
    {
      log: { level: 'silent' },
      policies: policyDir,
      servers: { app: server('app', false), trusted: server('trusted', true) },
    },
    { autoClose: false },
  )
  port = Number(new URL(gateway.url).port)
})

afterAll(async () => {
  agent.destroy()
  await gateway?.close(200)
  await backend?.close()
  rmSync(policyDir, { recursive: true, force: true })
})

/** What the gateway answered to each server path, by status and gateway reason (for the survey). */
const answers = new Map<string, number>()

/** POSTs exactly these headers and bytes over a keep-alive connection; resolves to the status. */
function post(path: string, sent: Built): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      path,
      method: 'POST',
      headers: sent.headers,
      setHost: false,
      agent,
    })
    req.setTimeout(5_000, () => req.destroy(new Error('no answer within 5 s')))
    req.on('response', (res) => {
      const answer = `${path} ${res.statusCode} ${String(res.headers['x-mcp-gateway-error'] ?? '')}`
      answers.set(answer, (answers.get(answer) ?? 0) + 1)
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(sent.body)
  })
}

/** Sends `c` to both servers at once and returns every violation, prefixed with the server. */
async function runCase(c: Case): Promise<string[]> {
  const sent = build(c, `127.0.0.1:${port}`)
  const before = backend.requests.length
  const statuses = await Promise.all(
    SERVERS.map((s) => post(`/mcp/${s}`, sent).catch((err: Error) => `transport: ${err.message}`)),
  )
  const received = backend.requests.slice(before)
  const out: string[] = []
  for (const [i, server] of SERVERS.entries()) {
    const status = statuses[i]
    const got = received.filter((r) => r.url === `/${server}`)
    const problems = violations(server, sent, got)
    if (typeof status === 'string') problems.push(`transport-error: ${status}`)
    else if (status === 500) problems.push('gateway-500')
    if (got.length === 0 && isPlain(c)) problems.push(`plain-not-forwarded: status ${status}`)
    out.push(...problems.map((p) => `${server} ${p}`))
  }
  return out
}

/** The request as sent, for a failure message a person can replay. */
function render(c: Case): string {
  const sent = build(c, 'gateway')
  const pairs: string[] = []
  for (let i = 0; i < sent.headers.length; i += 2)
    pairs.push(`${sent.headers[i]}: ${show(sent.headers[i + 1])}`)
  const body =
    c.encoding === 'utf8'
      ? sent.body.toString('utf8')
      : `(${c.encoding}) ${sent.body.toString('hex')}`
  return `${pairs.join('\n')}\n\n${body}`
}

describe('differential: every backend reading of a forwarded request names what the gateway judged', () => {
  it('holds for the bypasses seen in review and for generated requests (fixed seed)', async () => {
    if (process.env.MCP_EDGE_DIFF_SURVEY === '1') return survey()
    const counting = backend.requests.length
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const found = await runCase(c)
        if (found.length > 0) throw new Error(`${found.join('\n')}\n--- request ---\n${render(c)}`)
      }),
      { seed: SEED, numRuns: RUNS, examples: SEEN.map((c) => [c] as [Case]) },
    )
    // The property is only as strong as what got through: a gateway refusing everything would pass.
    for (const server of SERVERS) {
      const through = backend.requests.slice(counting).filter((r) => r.url === `/${server}`)
      expect(through.length, `${server} requests forwarded`).toBeGreaterThan(RUNS / 10)
    }
  }, 120_000)
})

// ---------------------------------------------------------------------------------------------
// Cache keys: the edge cache and a virtual server's merged answers agree on what one request is

/**
 * Every cache layer keys a request by the one canonical key (src/cache/request.ts): protocol
 * version and era, every param (cursor included), the client's capabilities, the policy view of
 * an answer stored filtered, and for a private answer the caller. Pairs of requests that differ
 * in some of these are generated and sent, A then B, to an edge-cached server and to a virtual
 * server over it; for each layer, B must get what the backend and the policy give B, a private
 * answer only ever its own caller's, and an answer of A's exactly when the key says A and B are
 * one request.
 */
describe('differential: every cache layer keys a request the same way', () => {
  const ISS = 'https://idp.example.com'
  const PUBLIC = 'https://mcp.example.com'
  const CAPABILITIES = [{}, { elicitation: { form: {} } }, { sampling: {} }] as const
  /** Principals: alice and carol see the same tools (team red), bob (team blue) fewer. */
  const PRINCIPALS = [
    { sub: 'alice', team: 'red' },
    { sub: 'carol', team: 'red' },
    { sub: 'bob', team: 'blue' },
  ] as const
  const VIEWS_POLICY = `rules:
  - name: everyone
    servers: [pub, priv]
    allow:
      tools: ["*"]
  - name: blue-keeps-stations
    servers: [pub, priv]
    when: { claims: { team: blue } }
    deny:
      tools: [delete_station]
`
  const ALL_TOOLS = [
    'get_forecast',
    'get_alerts',
    'slow_forecast',
    'confirm_action',
    'delete_station',
    'whoami',
  ]
  const PAGE = 3

  type Scope = 'pub' | 'priv'
  interface KeyedRequest {
    readonly principal: number
    readonly caps: number
    readonly page2: boolean
    readonly era: 'modern' | 'legacy'
  }
  interface Pair {
    readonly scope: Scope
    readonly a: KeyedRequest
    readonly b: KeyedRequest
  }

  const requestArb = fc.record({
    principal: fc.nat({ max: PRINCIPALS.length - 1 }),
    caps: fc.nat({ max: CAPABILITIES.length - 1 }),
    page2: fc.boolean(),
    era: fc.constantFrom('modern' as const, 'legacy' as const),
  })
  /** B is A with some of the key's inputs changed (none: the same request again). */
  const pairArb: fc.Arbitrary<Pair> = fc
    .record({
      scope: fc.constantFrom('pub' as const, 'priv' as const),
      a: requestArb,
      other: requestArb,
      changed: fc.subarray(['principal', 'caps', 'page2', 'era'] as const),
    })
    .map(({ scope, a, other, changed }) => ({
      scope,
      a,
      b: { ...a, ...Object.fromEntries(changed.map((k) => [k, other[k]])) },
    }))

  let gw: TestGateway
  let dir: string
  const backends: { close(): Promise<void> }[] = []
  const tokens: string[] = []
  /** A virtual server's cursor of page 2, per virtual server (its own sealed one). */
  const cursors = new Map<string, string>()
  /** Gateway sessions of 2025-era clients, per (virtual server, principal, capabilities). */
  const sessions = new Map<string, string>()
  /** Which principal each private answer (by its serial) was made for. */
  const owners = new Map<string, number>()
  let ids = 0
  let serial = 0
  /** How often each layer shared and kept apart, so a layer that never caches cannot pass. */
  const seen = { edgeShared: 0, edgeApart: 0, mergedHits: 0, mergedMisses: 0 }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-edge-diff-keys-'))
    writeFileSync(join(dir, 'views.yaml'), VIEWS_POLICY)
    const key = await generateTestKey('ES256')
    const jwks = await startJwks([key])
    backends.push(jwks)
    // Every backend answer is numbered (in a description), so a served answer names its request.
    const numbered = {
      get get_forecast() {
        return `answer #${++serial}`
      },
      get whoami() {
        return `answer #${serial}`
      },
    }
    const backend = (scope: 'public' | 'private') =>
      startSdkServer({
        toolsByCapability: true,
        toolsPageSize: PAGE,
        descriptions: numbered,
        cacheHints: { 'tools/list': { ttlMs: 60_000, cacheScope: scope } },
      })
    const [pub, priv] = await Promise.all([backend('public'), backend('private')])
    backends.push(pub, priv)
    gw = await startTestGateway(
      {
        log: { level: 'info' },
        policies: dir,
        cache: { private: true },
        auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
        servers: {
          pub: { upstreams: [{ url: pub.url }] },
          priv: { upstreams: [{ url: priv.url }] },
        },
        virtualServers: { vpub: { members: ['pub'] }, vpriv: { members: ['priv'] } },
      },
      { autoClose: false, start: { watch: false } },
    )
    const aud = ['pub', 'priv', 'vpub', 'vpriv'].map((s) => `${PUBLIC}/mcp/${s}`)
    for (const p of PRINCIPALS)
      tokens.push(await mintToken(claimsFor(ISS, aud, { ...p }, 3600), { key }))
    for (const v of ['vpub', 'vpriv']) {
      const first = await keyedPost(
        v,
        { principal: 0, caps: 0, page2: false, era: 'modern' },
        'setup',
      )
      cursors.set(v, (first.response().result as { nextCursor: string }).nextCursor)
    }
  })

  afterAll(async () => {
    await gw?.close(100)
    await Promise.all(backends.map((b) => b.close()))
    rmSync(dir, { recursive: true, force: true })
  })

  /** The params of `r`, with `probe` keeping each pair's entries apart from every other pair's. */
  function paramsOf(server: string, r: KeyedRequest, probe: string): Record<string, unknown> {
    if (!r.page2) return { probe }
    return {
      probe,
      cursor: server.startsWith('v') ? (cursors.get(server) as string) : String(PAGE),
    }
  }

  /** A 2025-era session of the gateway's virtual server for `r`'s principal and capabilities. */
  async function session(server: string, r: KeyedRequest): Promise<string> {
    const k = `${server}|${r.principal}|${r.caps}`
    const known = sessions.get(k)
    if (known !== undefined) return known
    const res = await rawPost(
      `${gw.url}/mcp/${server}`,
      {
        ...LEGACY_INITIALIZE,
        params: { ...LEGACY_INITIALIZE.params, capabilities: CAPABILITIES[r.caps] },
      },
      {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${tokens[r.principal]}`,
      },
    )
    const id = res.headers['mcp-session-id']
    expect(typeof id, res.text).toBe('string')
    sessions.set(k, id as string)
    return id as string
  }

  /** Sends `r` as tools/list to `server`. */
  async function keyedPost(server: string, r: KeyedRequest, probe: string): Promise<RawResponse> {
    const id = ++ids
    const params = paramsOf(server, r, probe)
    const auth = { authorization: `Bearer ${tokens[r.principal]}` }
    if (r.era === 'legacy') {
      const headers = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
        ...auth,
        ...(server.startsWith('v') && { 'mcp-session-id': await session(server, r) }),
      }
      return rawPost(
        `${gw.url}/mcp/${server}`,
        { jsonrpc: '2.0', id, method: 'tools/list', params },
        headers,
      )
    }
    const meta = envelope({ 'io.modelcontextprotocol/clientCapabilities': CAPABILITIES[r.caps] })
    const body = { jsonrpc: '2.0', id, method: 'tools/list', params: { ...params, _meta: meta } }
    return rawPost(`${gw.url}/mcp/${server}`, body, { ...mcpHeaders('tools/list'), ...auth })
  }

  /** The tools the backend and the policy give `r`: by capability, by page, by view. */
  function expectedTools(r: KeyedRequest): string[] {
    const elicits = 'elicitation' in (CAPABILITIES[r.caps] ?? {})
    const listed = ALL_TOOLS.filter((t) => elicits || t !== 'confirm_action')
    const page = r.page2 ? listed.slice(PAGE) : listed.slice(0, PAGE)
    return PRINCIPALS[r.principal]?.team === 'blue'
      ? page.filter((t) => t !== 'delete_station')
      : page
  }

  /**
   * One answer: checked against what `r` is given, and its serial (which backend answer it is).
   * `r` as its backend reads it: a 2025-era request straight to a (stateless) server carries no
   * capabilities, which only its `initialize` named.
   */
  function answered(res: RawResponse, r: KeyedRequest, scope: Scope, where: string): string {
    expect(res.status, `${where}: ${res.text.slice(0, 300)}`).toBe(200)
    const tools = (res.response().result as { tools: { name: string; description?: string }[] })
      .tools
    expect(
      tools.map((t) => t.name),
      `${where}: the tools`,
    ).toEqual(expectedTools(r))
    const numbered = tools.find((t) => t.name === 'get_forecast' || t.name === 'whoami')
    const n = numbered?.description ?? ''
    expect(n, `${where}: a numbered answer`).toMatch(/^answer #\d+$/)
    if (scope === 'priv') {
      // SECURITY: a private answer is only ever its own caller's, on every layer.
      const owner = owners.get(n)
      if (owner === undefined) owners.set(n, r.principal)
      else expect(owner, `${where}: the caller of a private answer`).toBe(r.principal)
    }
    return n
  }

  /** The outcome of the last access line for `server`, once the line is written. */
  async function lastOutcome(server: string, before: number): Promise<unknown> {
    const lines = (): Record<string, unknown>[] =>
      gw.logs.filter((l) => l.msg === 'request' && l.server === server)
    await expect.poll(() => lines().length).toBeGreaterThan(before)
    return lines().at(-1)?.outcome
  }

  async function runPair(p: Pair, probe: string): Promise<void> {
    const { scope, a, b } = p
    const same = (k: keyof KeyedRequest): boolean => a[k] === b[k]
    const sameRequest = same('caps') && same('page2')
    const label = JSON.stringify(p)
    // The edge cache: 2025-era requests carry no cache hints and are never cached.
    const direct = (r: KeyedRequest): KeyedRequest => (r.era === 'legacy' ? { ...r, caps: 0 } : r)
    const edgeA = answered(await keyedPost(scope, a, probe), direct(a), scope, `${label} edge A`)
    const edgeB = answered(await keyedPost(scope, b, probe), direct(b), scope, `${label} edge B`)
    const edgeShares =
      a.era === 'modern' &&
      b.era === 'modern' &&
      sameRequest &&
      (scope === 'pub' || same('principal'))
    expect(edgeB === edgeA, `${label}: B answered with A's entry by the edge cache`).toBe(
      edgeShares,
    )
    seen[edgeShares ? 'edgeShared' : 'edgeApart']++
    // The merged answers: a claim-dependent view makes every merged answer private (per caller);
    // a 2025-era client's request is the 2026-07-28 one its session makes of it.
    const v = `v${scope}`
    answered(await keyedPost(v, a, `${probe}v`), a, scope, `${label} virtual A`)
    const before = gw.logs.filter((l) => l.msg === 'request' && l.server === v).length
    answered(await keyedPost(v, b, `${probe}v`), b, scope, `${label} virtual B`)
    const mergedHit = (await lastOutcome(v, before)) === 'cache_hit'
    expect(mergedHit, `${label}: B answered from A's merged entry`).toBe(
      sameRequest && same('principal'),
    )
    seen[mergedHit ? 'mergedHits' : 'mergedMisses']++
    // Where both layers cache both requests, they agree on same and different.
    if (a.era === 'modern' && b.era === 'modern' && same('principal'))
      expect(mergedHit, `${label}: the layers agree`).toBe(edgeShares)
  }

  it('agrees on same and different over generated pairs of requests (fixed seed)', async () => {
    let pairs = 0
    await fc.assert(
      fc.asyncProperty(pairArb, async (p) => runPair(p, `pair-${++pairs}`)),
      {
        seed: SEED,
        numRuns: Number(process.env.MCP_EDGE_DIFF_KEY_RUNS ?? 60),
        examples: [
          // The review's case: one client's capability-dependent list, another's request.
          [
            {
              scope: 'pub',
              a: { principal: 0, caps: 1, page2: false, era: 'modern' },
              b: { principal: 0, caps: 0, page2: false, era: 'modern' },
            },
          ],
          [
            {
              scope: 'priv',
              a: { principal: 0, caps: 1, page2: true, era: 'legacy' },
              b: { principal: 1, caps: 1, page2: true, era: 'modern' },
            },
          ],
        ],
      },
    )
    for (const [what, n] of Object.entries(seen)) expect(n, what).toBeGreaterThan(0)
  }, 120_000)
})

/** Runs the same cases without stopping and fails with one shortest example per violation class. */
async function survey(): Promise<void> {
  const cases = [...SEEN, ...fc.sample(caseArb, { seed: SEED, numRuns: RUNS })]
  const classes = new Map<string, { count: number; example: Case; detail: string }>()
  for (const c of cases) {
    for (const v of await runCase(c)) {
      const cls = v.split(':')[0] as string
      const seen = classes.get(cls)
      const size = render(c).length
      if (seen === undefined || size < render(seen.example).length) {
        classes.set(cls, { count: (seen?.count ?? 0) + 1, example: c, detail: v })
      } else seen.count++
    }
  }
  const forwarded = SERVERS.map(
    (s) =>
      `${s}: ${backend.requests.filter((r) => r.url === `/${s}`).length} of ${cases.length} forwarded`,
  )
  const answered = [...answers.entries()].sort().map(([a, n]) => `${a}: ${n}`)
  console.info(`${forwarded.join(', ')}\n${answered.join('\n')}`)
  const table = [...classes.entries()].map(
    ([cls, { count, example, detail }]) =>
      `## ${cls} (${count})\n${detail}\n${render(example)}\n${show(example)}`,
  )
  expect(table.join('\n\n')).toBe('')
}
