import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { envelope, mcpHeaders, mcpPost, rawPost } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MEMBER_READERS, parseJson, type JsonNode } from '../helpers/readers.js'
import { startRecordingBackend, type RecordingBackend } from '../helpers/recording-backend.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'

/**
 * The differential property for arguments under a condition (docs/security.md §What the gateway
 * reads in a body): for every call the gateway forwards, every backend reader of
 * test/helpers/readers.ts (last-key-wins as JSON.parse and so the condition, first-key-wins, Go's
 * encoding/json into structs, cJSON, objects built by assignment) finds, at every path a
 * condition reads, the value the condition read there, or nothing where it found nothing.
 * Bodies are generated around those paths: each key on the way exact, escaped, in a case variant
 * (ASCII, `ſ`, `K`, `ı`, other letters), cut at NUL, alone or next to the exact key, duplicated,
 * or under `__proto__`, at every depth, between keys no condition reads (in variants too). They
 * go to a server with `trustHeaders: false`, one with `true`, and a virtual server over a third.
 *
 * Set MCP_EDGE_DIFF_SEED and MCP_EDGE_DIFF_RUNS to explore beyond CI.
 */

const SEED = Number(process.env.MCP_EDGE_DIFF_SEED ?? 20261201)
const RUNS = Number(process.env.MCP_EDGE_DIFF_RUNS ?? 300)

const SERVERS = '[app, trusted, member]'
const POLICY = `
rules:
  - name: tools
    servers: ${SERVERS}
    allow: { tools: [send_email, export, forward, notify, bulk_send] }
  - name: no-blind-copies
    servers: ${SERVERS}
    deny: { tools: [send_email] }
    if: 'has(args.bcc) || has(args.headers) && has(args.headers.bcc)'
  - name: summary-exports
    servers: ${SERVERS}
    deny: { tools: [export] }
    unless: '!has(args.opts) || !has(args.opts.kind) || args.opts.kind == "summary"'
  - name: no-copies
    servers: ${SERVERS}
    deny: { tools: [forward] }
    if: "'cc' in args || 'größe' in args"
  - name: no-bcc-keys
    servers: ${SERVERS}
    deny: { tools: [notify] }
    if: 'args.exists(k, k == "bcc")'
  - name: no-bulk-copies
    servers: ${SERVERS}
    deny: { tools: [bulk_send] }
    if: 'has(args.items) && args.items.exists(i, has(i.bcc))'
`

/**
 * The paths each tool's condition reads (`*`: every element of a list). A backend's struct has
 * fields of these names; a key it takes for one of them must hold what the condition saw.
 */
const READS: Readonly<Record<string, readonly (readonly string[])[]>> = {
  send_email: [['bcc'], ['headers', 'bcc']],
  export: [['opts', 'kind']],
  forward: [['cc'], ['größe']],
  notify: [['bcc']],
  bulk_send: [['items', '*', 'bcc']],
}
const TOOLS = Object.keys(READS)

// ---------------------------------------------------------------------------------------------
// Generated arguments

type Spelling =
  | 'exact'
  | 'escaped'
  | 'upper-first'
  | 'upper'
  | 'last-upper'
  | 'long-s'
  | 'kelvin'
  | 'dotless'
  | 'letters'
  | 'nul'
  | 'nul-x'
type Mode = 'lone' | 'pair-before' | 'pair-after' | 'dup' | 'proto'

/** How one key on a read path is written. */
interface KeyCase {
  readonly spelling: Spelling
  readonly mode: Mode
}

/** A JSON value to serialise: a string, an object (raw key text and value), or a list. */
type Value = string | { readonly o: readonly Entry[] } | { readonly a: readonly Value[] }
interface Entry {
  readonly text: string
  readonly value: Value
}

interface Case {
  readonly tool: string
  /** Per read path of the tool: whether it is in the body, and how each key on it is written. */
  readonly paths: readonly (readonly KeyCase[] | undefined)[]
  /** Keys no condition reads, in any spelling. */
  readonly noise: readonly { readonly key: string; readonly spelling: Spelling }[]
  readonly order: number
  readonly values: readonly string[]
}

const SPELLINGS: readonly Spelling[] = [
  'exact',
  'escaped',
  'upper-first',
  'upper',
  'last-upper',
  'long-s',
  'kelvin',
  'dotless',
  'letters',
  'nul',
  'nul-x',
]

const keyCaseArb: fc.Arbitrary<KeyCase> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<KeyCase>({ spelling: 'exact', mode: 'lone' }) },
  {
    weight: 4,
    arbitrary: fc.record({
      spelling: fc.constantFrom(...SPELLINGS),
      mode: fc.constantFrom<Mode>('lone', 'lone', 'pair-before', 'pair-after', 'dup', 'proto'),
    }),
  },
)

const caseArb: fc.Arbitrary<Case> = fc.constantFrom(...TOOLS).chain((tool) =>
  fc.record({
    tool: fc.constant(tool),
    paths: fc.tuple(
      ...(READS[tool] ?? []).map((p) =>
        fc.option(fc.array(keyCaseArb, { minLength: p.length, maxLength: p.length }), {
          freq: 4,
          nil: undefined,
        }),
      ),
    ),
    noise: fc.array(
      fc.record({
        key: fc.constantFrom('to', 'subject', 'body', 'priority', 'kinds', 'ccs'),
        spelling: fc.constantFrom(...SPELLINGS),
      }),
      { maxLength: 3 },
    ),
    order: fc.nat(),
    values: fc.array(fc.constantFrom('summary', 'full', 'spy@elsewhere.test', 'a@example.com'), {
      minLength: 4,
      maxLength: 4,
    }),
  }),
)

/** `key` written one way (undefined: that spelling does not change this key). */
function spell(key: string, s: Spelling): string | undefined {
  const at = (i: number, to: (c: string) => string): string =>
    key.slice(0, i) + to(key.charAt(i)) + key.slice(i + 1)
  const replaced = (from: string, to: string): string | undefined =>
    key.includes(from) ? key.replace(from, to) : undefined
  switch (s) {
    case 'exact':
    case 'escaped':
      return key
    case 'upper-first':
      return at(0, (c) => c.toUpperCase())
    case 'upper':
      return key.toUpperCase()
    case 'last-upper':
      return at(key.length - 1, (c) => c.toUpperCase())
    case 'long-s':
      return replaced('s', '\u017f')
    case 'kelvin':
      return replaced('k', '\u212a')
    case 'dotless':
      return replaced('i', '\u0131')
    case 'letters':
      // Simple upper case of every letter that has one (ß has none): Go folds these back.
      return [...key].map((c) => (c.toUpperCase().length === 1 ? c.toUpperCase() : c)).join('')
    case 'nul':
      return `${key}\u0000`
    case 'nul-x':
      return `${key}\u0000x`
  }
}

/** The JSON text of a key: `escaped` writes its first character as a \u escape. */
function keyText(key: string, s: Spelling): string {
  if (s !== 'escaped') return JSON.stringify(key)
  const hex = key.charCodeAt(0).toString(16).padStart(4, '0')
  return `"\\u${hex}${JSON.stringify(key).slice(2)}`
}

/** True when the key, as written, is the key itself to every reader. */
const plain = (k: KeyCase): boolean =>
  k.mode === 'lone' && (k.spelling === 'exact' || k.spelling === 'escaped')

/** The entries that write `key` (holding `value`) as `k` says, and how the key is refused. */
function entries(key: string, k: KeyCase, value: Value, decoy: Value): Entry[] {
  const variant = spell(key, k.spelling) ?? key
  const text = variant === key ? keyText(key, k.spelling) : JSON.stringify(variant)
  const exact = JSON.stringify(key)
  switch (k.mode) {
    case 'lone':
      return [{ text, value }]
    case 'pair-before':
      return [
        { text, value: decoy },
        { text: exact, value },
      ]
    case 'pair-after':
      return [
        { text: exact, value },
        { text, value: decoy },
      ]
    case 'dup':
      return [
        { text: exact, value },
        { text: exact, value: decoy },
      ]
    case 'proto':
      return [{ text: '"__proto__"', value: { o: [{ text: exact, value }] } }]
  }
}

/** The entries of one read path from `depth` down, its keys written as `cases` say. */
function pathEntries(path: readonly string[], cases: readonly KeyCase[], leaf: string): Entry[] {
  const build = (depth: number): Value => {
    if (depth === path.length) return leaf
    const key = path[depth] as string
    const below = build(depth + 1)
    if (key === '*') return { a: [{ o: [{ text: '"note"', value: 'x' }] }, below] }
    const k = cases[depth] as KeyCase
    return { o: entries(key, k, below, 'decoy') }
  }
  const top = build(0)
  return typeof top === 'object' && 'o' in top ? [...top.o] : []
}

/** The four non-ASCII letters that fold onto ASCII ones, then ASCII case (enough for noise). */
function asciiFold(key: string): string {
  return key
    .replace(/\u017f/g, 's')
    .replace(/\u212a/g, 'k')
    .replace(/\u0131/g, 'i')
    .toLowerCase()
}

function serialise(v: Value): string {
  if (typeof v === 'string') return JSON.stringify(v)
  if ('a' in v) return `[${v.a.map(serialise).join(',')}]`
  return `{${v.o.map((e) => `${e.text}:${serialise(e.value)}`).join(',')}}`
}

/** The case's arguments, as JSON text, and whether every read key in it is written plainly. */
function argumentsOf(c: Case): { text: string; plain: boolean } {
  const paths = READS[c.tool] ?? []
  const all: Entry[] = []
  let isPlain = true
  for (const [i, cases] of c.paths.entries()) {
    if (cases === undefined) continue
    const path = paths[i] as readonly string[]
    if (!cases.every((k, depth) => path[depth] === '*' || plain(k))) isPlain = false
    all.push(...pathEntries(path, cases, c.values[i] ?? 'x'))
  }
  for (const n of c.noise) {
    const key = spell(n.key, n.spelling) ?? n.key
    all.push({
      text: key === n.key ? keyText(n.key, n.spelling) : JSON.stringify(key),
      value: 'hi',
    })
  }
  // Two noise keys a reader folds together are refused by the pair rule, and so is a key cut at
  // NUL where a condition reads every key (notify's, here at the top of every call): not plain.
  const folded = new Set<string>()
  for (const n of c.noise) {
    const key = spell(n.key, n.spelling) ?? n.key
    const f = asciiFold(key.split('\u0000')[0] ?? '')
    if (folded.has(f) || key.includes('\u0000')) isPlain = false
    folded.add(f)
  }
  // A fixed rotation of the entries, so read keys come before, between and after the others.
  const r = all.length === 0 ? 0 : c.order % all.length
  const ordered = [...all.slice(r), ...all.slice(0, r)]
  return { text: serialise({ o: ordered }), plain: isPlain }
}

function bodyOf(c: Case, id: number): string {
  const meta = JSON.stringify(envelope())
  const args = argumentsOf(c).text
  return `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":${JSON.stringify(c.tool)},"arguments":${args},"_meta":${meta}}}`
}

// ---------------------------------------------------------------------------------------------
// The oracle

type Reader = keyof typeof MEMBER_READERS
const READERS = Object.keys(MEMBER_READERS) as Reader[]

/** What one reader finds at `path` below `node`, as text (`*` maps over a list). */
function readPath(reader: Reader, node: JsonNode | undefined, path: readonly string[]): string {
  if (path.length === 0) return node === undefined ? 'absent' : JSON.stringify(render(node))
  const [key, ...rest] = path as [string, ...string[]]
  if (key === '*') {
    if (node?.t !== 'arr') return node === undefined ? 'absent' : 'not a list'
    return `[${node.items.map((item) => readPath(reader, item, rest)).join(',')}]`
  }
  return readPath(reader, MEMBER_READERS[reader](node, key), rest)
}

function render(n: JsonNode): unknown {
  if (n.t === 'str' || n.t === 'lit') return n.v
  if (n.t === 'num') return n.raw
  return n.t === 'obj' ? 'an object' : 'a list'
}

/** Every reader whose value at a read path is not the condition's (last-key's) value. */
function violations(body: Buffer): string[] {
  const root = parseJson(body.toString('utf8'))
  const out: string[] = []
  const tool = readPath('last-key', root, ['params', 'name'])
  for (const path of READS[JSON.parse(tool) as string] ?? []) {
    const full = ['params', 'arguments', ...path]
    const judged = readPath('last-key', root, full)
    for (const reader of READERS) {
      const read = readPath(reader, root, full)
      if (read !== judged)
        out.push(`${reader} reads ${path.join('.')} as ${read}; the condition read ${judged}`)
    }
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// The run

let recording: RecordingBackend
let member: SdkTestServer
let gateway: TestGateway
let policyDir: string

beforeAll(async () => {
  policyDir = mkdtempSync(join(tmpdir(), 'mcp-edge-diff-conditions-'))
  writeFileSync(join(policyDir, 'policy.yaml'), POLICY)
  recording = await startRecordingBackend()
  member = await startSdkServer({ extraTools: TOOLS })
  const at = (path: string) => [{ url: `${recording.origin}/${path}` }]
  gateway = await startTestGateway(
    {
      log: { level: 'silent' },
      policies: policyDir,
      servers: {
        app: { upstreams: at('app'), trustHeaders: false },
        trusted: { upstreams: at('trusted'), trustHeaders: true },
        member: { upstreams: [{ url: member.url }], trustHeaders: true },
      },
      virtualServers: { desk: { members: ['member'], prefix: 'never' } },
    },
    { autoClose: false },
  )
  // The virtual server learns who serves what, so a call could go on its headers alone.
  await mcpPost(gateway.mcpUrl('desk'), 'tools/list', {}, { id: 0 })
})

afterAll(async () => {
  await gateway?.close(200)
  await member?.close()
  await recording?.close()
  rmSync(policyDir, { recursive: true, force: true })
})

/** What each route received of the calls sent so far. */
function received(): Record<string, Buffer[]> {
  const calls = (path: string) =>
    recording.requests.filter((r) => r.url === `/${path}`).map((r) => r.body)
  return {
    app: calls('app'),
    trusted: calls('trusted'),
    desk: member.calls('tools/call').map((r) => r.body),
  }
}

let id = 1

/** Sends `c` to every route; returns what is wrong with what the backends received. */
async function runCase(c: Case): Promise<string[]> {
  const before = received()
  const body = bodyOf(c, id++)
  const headers = mcpHeaders('tools/call', c.tool)
  const routes = Object.keys(before)
  const answers = await Promise.all(routes.map((r) => rawPost(gateway.mcpUrl(r), body, headers)))
  const after = received()
  const out: string[] = []
  for (const [i, route] of routes.entries()) {
    const got = (after[route] ?? []).slice(before[route]?.length ?? 0)
    for (const b of got) out.push(...violations(b).map((v) => `${route}: ${v}`))
    const status = answers[i]?.status
    if (status !== 200 && status !== 400) out.push(`${route}: status ${status}`)
    // The property is only as strong as what gets through: plain keys are never refused.
    if (argumentsOf(c).plain && status !== 200) out.push(`${route}: plain body refused (${status})`)
  }
  return out
}

/** The bypasses this test was written for: a lone variant at each depth a condition reads. */
const SEEN: Case[] = [
  ['send_email', [[{ spelling: 'upper-first', mode: 'lone' }], undefined]],
  ['send_email', [undefined, [EXACT(), { spelling: 'nul', mode: 'lone' }]]],
  ['export', [[EXACT(), { spelling: 'kelvin', mode: 'lone' }]]],
  ['forward', [undefined, [{ spelling: 'letters', mode: 'lone' }]]],
  ['notify', [[{ spelling: 'upper', mode: 'lone' }]]],
  ['bulk_send', [[EXACT(), EXACT(), { spelling: 'last-upper', mode: 'lone' }]]],
  ['send_email', [[{ spelling: 'exact', mode: 'proto' }], undefined]],
].map(([tool, paths]) => ({
  tool: tool as string,
  paths: paths as readonly (readonly KeyCase[] | undefined)[],
  noise: [{ key: 'to', spelling: 'upper-first' }],
  order: 1,
  values: ['full', 'full', 'full', 'full'],
}))

function EXACT(): KeyCase {
  return { spelling: 'exact', mode: 'lone' }
}

describe('differential: arguments under a condition read the same to every backend reader', () => {
  it('holds for the bypasses seen in review and for generated bodies (fixed seed)', async () => {
    const counting = received()
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const found = await runCase(c)
        if (found.length > 0)
          throw new Error(`${found.join('\n')}\n--- arguments ---\n${argumentsOf(c).text}`)
      }),
      { seed: SEED, numRuns: RUNS, examples: SEEN.map((c) => [c] as [Case]) },
    )
    for (const [route, bodies] of Object.entries(received())) {
      const through = bodies.length - (counting[route]?.length ?? 0)
      expect(through, `${route} calls forwarded`).toBeGreaterThan(RUNS / 10)
    }
  }, 120_000)
})
