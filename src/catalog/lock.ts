/**
 * The catalog lock file (catalog.lock.yaml): per server, the digest of its instructions, of
 * every tool and prompt definition and of every skill's manifest as reviewed, and the model view
 * itself for the reviewer (docs/catalog.md §Pinning).
 * Reading is strict: unknown keys, a definition under another name, or a digest that does not
 * match the definition beside it are errors, so a hand edit cannot pin text nobody hashed.
 */
import { readFile } from 'node:fs/promises'
import { LineCounter, parseDocument, stringify } from 'yaml'
import { aliasErrors } from '../config/located.js'
import { z } from 'zod'
import { type CatalogKind, definitionDigest, MODEL_FIELDS, type PinnedKind } from './definition.js'

export interface LockedDefinition {
  readonly digest: string
  /** The model view (definition.ts modelView) the digest covers. */
  readonly definition: Readonly<Record<string, unknown>>
}
export interface ServerLock {
  /** The server's instructions as reviewed; absent when it gave none (nothing is pinned then). */
  readonly instructions?: LockedDefinition | undefined
  readonly tools: ReadonlyMap<string, LockedDefinition>
  readonly prompts: ReadonlyMap<string, LockedDefinition>
  /**
   * Skills by the URI of their SKILL.md (definition.ts: the manifest); absent in a lock written
   * before skills were pinned, which then pins none.
   */
  readonly skills?: ReadonlyMap<string, LockedDefinition> | undefined
}
export interface CatalogLock {
  readonly version: 1
  readonly servers: ReadonlyMap<string, ServerLock>
}

/** The kinds whose definitions a lock keys by name (or, for skills, by SKILL.md URI). */
const NAMED: readonly Exclude<PinnedKind, 'instructions'>[] = ['tools', 'prompts', 'skills']

const DIGEST = /^sha256:[0-9a-f]{64}$/
const locked = z.strictObject({
  digest: z.string().regex(DIGEST, 'expected sha256:<64 lowercase hex digits>'),
  definition: z.custom<Record<string, unknown>>(isObject, 'expected a mapping'),
})
// Only the top level goes through zod: its records copy entries by assignment, and a name such
// as `__proto__` (a legal tool name) would vanish. Below it, parseLock walks the parsed YAML.
const lockSchema = z.strictObject({
  version: z.literal(1),
  servers: z.unknown(),
})

/** Header of every rendered lock; a YAML comment, so it is not part of what is checked. */
const HEADER =
  '# Written by `mcp-edge pin` (docs/catalog.md §Pinning). Review changes; do not edit by hand:\n' +
  '# every digest is checked against the definition beside it.\n'

/** Parses lock text; throws an Error naming `source` and the path of the first problems. */
export function parseLock(text: string, source: string): CatalogLock {
  const lines = new LineCounter()
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, lineCounter: lines })
  if (doc.errors.length > 0) {
    throw new Error(`${source}: ${doc.errors.map((e) => `yaml: ${e.message}`).join('\n  ')}`)
  }
  // An alias toJS cannot turn into a value (it threw, or made a value containing itself).
  const aliases = aliasErrors(doc, lines, text)
  if (aliases.length > 0) throw new Error(`${source}: ${aliases.map((e) => e.text).join('\n  ')}`)
  const raw = doc.toJS() as unknown
  const parsed = lockSchema.safeParse(raw)
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) =>
      i.code === 'unrecognized_keys'
        ? i.keys.map((k) => `${k}: unknown key`).join('\n  ')
        : `${pathText(i.path) || '(root)'}: ${i.message}`,
    )
    throw new Error(`${source}: ${problems.join('\n  ')}`)
  }
  const problems: string[] = []
  const servers = new Map<string, ServerLock>()
  for (const [server, entry] of entriesAt(parsed.data.servers, 'servers', problems)) {
    const lock: Record<CatalogKind | 'skills', Map<string, LockedDefinition>> & {
      instructions?: LockedDefinition
    } = {
      tools: new Map(),
      prompts: new Map(),
      skills: new Map(),
    }
    for (const [key] of entriesAt(entry, `servers.${server}`, problems)) {
      if (key !== 'tools' && key !== 'prompts' && key !== 'skills' && key !== 'instructions')
        problems.push(`servers.${server}.${key}: unknown key`)
    }
    const instructions = isObject(entry) ? entry.instructions : undefined
    if (instructions !== undefined && instructions !== null) {
      const at = `servers.${server}.instructions`
      const one = locked.safeParse(instructions)
      if (!one.success)
        for (const i of one.error.issues) problems.push(`${at}.${pathText(i.path)}: ${i.message}`)
      else {
        const problem = definitionProblem(
          'instructions',
          undefined,
          one.data.definition,
          one.data.digest,
        )
        if (problem !== undefined) problems.push(`${at}: ${problem}`)
        else lock.instructions = { digest: one.data.digest, definition: one.data.definition }
      }
    }
    for (const kind of NAMED) {
      const list = isObject(entry) ? entry[kind] : undefined
      for (const [name, d] of entriesAt(list, `servers.${server}.${kind}`, problems)) {
        const at = `servers.${server}.${kind}.${name}`
        const one = locked.safeParse(d)
        if (!one.success) {
          for (const i of one.error.issues) problems.push(`${at}.${pathText(i.path)}: ${i.message}`)
          continue
        }
        const problem = definitionProblem(kind, name, one.data.definition, one.data.digest)
        if (problem !== undefined) problems.push(`${at}: ${problem}`)
        else lock[kind].set(name, { digest: one.data.digest, definition: one.data.definition })
      }
    }
    servers.set(server, lock)
  }
  if (problems.length > 0) throw new Error(`${source}: ${problems.join('\n  ')}`)
  return { version: 1, servers }
}

/** The own entries of a YAML mapping; null or absent reads as empty, anything else is a problem. */
function entriesAt(v: unknown, at: string, problems: string[]): [string, unknown][] {
  if (v === null || v === undefined) return []
  if (isObject(v)) return Object.entries(v)
  problems.push(`${at}: expected a mapping`)
  return []
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/**
 * Why a locked definition cannot be trusted, or undefined when it can. `name` is its key, for the
 * kinds with names (a skill's is its SKILL.md URI); instructions are one non-empty text (none at
 * all is no entry).
 */
function definitionProblem(
  kind: PinnedKind,
  name: string | undefined,
  definition: Record<string, unknown>,
  digest: string,
): string | undefined {
  const extra = Object.keys(definition).filter((k) => !MODEL_FIELDS[kind].includes(k))
  if (extra.length > 0) return `definition has fields a digest does not cover: ${extra.join(', ')}`
  if (kind === 'instructions') {
    const text = definition['instructions']
    if (typeof text !== 'string' || text === '') return 'definition.instructions is not a text'
  } else if (kind === 'skills') {
    if (definition['uri'] !== name) return `definition.uri is not ${JSON.stringify(name)}`
  } else if (definition['name'] !== name) return `definition.name is not ${JSON.stringify(name)}`
  const actual = definitionDigest(kind, definition)
  if (actual !== digest) return `digest does not match the definition (it hashes to ${actual})`
  return undefined
}

/** Reads and parses a lock file; errors name the file. */
export async function readLock(path: string): Promise<CatalogLock> {
  return parseLock(await readFile(path, 'utf8'), path)
}

/**
 * The lock as YAML. Stable: servers and definitions sorted by name, each definition's fields in
 * reading order (definition.ts MODEL_FIELDS) and every nested object's keys sorted, so the text is
 * a function of the digests alone and a re-pin without change writes the same bytes. Multi-line
 * text is written as literal blocks and never folded, so a review diff shows the lines a model
 * reads.
 */
export function renderLock(lock: CatalogLock): string {
  const servers: Record<string, unknown> = {}
  for (const server of sortedKeys(lock.servers)) {
    const entry = lock.servers.get(server)
    const out: Record<string, Record<string, unknown>> = {}
    // A reviewer reads what the server says of itself first; none is no key, as in locks
    // written before instructions were pinned.
    const instructions = entry?.instructions
    if (instructions !== undefined)
      out.instructions = {
        digest: instructions.digest,
        definition: readingOrder('instructions', instructions.definition),
      }
    out.tools = {}
    out.prompts = {}
    // Only a server that has skills has the key, so locks of servers without any read as before.
    if (entry?.skills !== undefined && entry.skills.size > 0) out.skills = {}
    for (const kind of NAMED) {
      const defs = entry?.[kind] ?? new Map<string, LockedDefinition>()
      const into = out[kind]
      if (into === undefined) continue
      for (const name of sortedKeys(defs)) {
        const d = defs.get(name) as LockedDefinition
        setOwn(into, name, { digest: d.digest, definition: readingOrder(kind, d.definition) })
      }
    }
    setOwn(servers, server, out)
  }
  return HEADER + renderYaml({ version: 1, servers })
}

/** YAML text of a plain JSON value, written as renderLock writes it (also used for review diffs). */
export function renderYaml(value: unknown): string {
  return stringify(value, {
    lineWidth: 0,
    blockQuote: 'literal',
    aliasDuplicateObjects: false,
  })
}

/** A definition with its fields in reading order and every nested object's keys sorted. */
export function readingOrder(
  kind: PinnedKind,
  definition: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const field of MODEL_FIELDS[kind]) {
    if (definition[field] !== undefined) out[field] = sortedDeep(definition[field])
  }
  return out
}

/** A copy of a JSON value with every object's keys in canonicalJson's order. */
function sortedDeep(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedDeep)
  if (typeof v !== 'object' || v === null) return v
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(v).sort()) {
    const x = (v as Record<string, unknown>)[k]
    if (x !== undefined) setOwn(out, k, sortedDeep(x))
  }
  return out
}

/** `obj[key] = value`, except that a key `__proto__` (a legal name) stays an own member. */
function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true })
}

function sortedKeys(m: ReadonlyMap<string, unknown>): string[] {
  return [...m.keys()].sort()
}

function pathText(path: readonly PropertyKey[]): string {
  let out = ''
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p)
  return out
}
