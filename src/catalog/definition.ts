/**
 * What a model reads of one tool or prompt definition, or of a server's own instructions, and its
 * digest. A lock file pins these digests (docs/catalog.md §Pinning): a backend that changes
 * anything here after review has changed what every agent takes as instructions, and nothing
 * else it may change (icons, `_meta`) does that.
 */
import { createHash } from 'node:crypto'

export type CatalogKind = 'tools' | 'prompts'
/**
 * What a lock pins: the definitions of a kind, by name, a server's own `instructions`, which a
 * client hands to the model as the server's (spec 2026-07-28 server/discover, spec 2025-11-25
 * basic/lifecycle InitializeResult) and a virtual server joins across its members, and the skills
 * of the skills extension by the URI of their SKILL.md (skills.mdx §Skill Entries), each pinned as
 * its manifest: the frontmatter a host registers it by and the digest and size of every file.
 */
export type PinnedKind = CatalogKind | 'instructions' | 'skills'

/**
 * The fields a model reads, in the order a reviewer reads them (the lock renders them so).
 * Tools: spec 2026-07-28 server/tools §Tool; prompts: server/prompts §Prompt. Left out on purpose:
 * `icons` (shown to users by the client, never put in the model's context), `_meta` (protocol
 * metadata a client does not pass to the model), and `execution` (how the call runs, not what it
 * does). See docs/catalog.md §What the digest covers.
 */
export const MODEL_FIELDS: Readonly<Record<PinnedKind, readonly string[]>> = {
  tools: ['name', 'title', 'description', 'inputSchema', 'outputSchema', 'annotations'],
  prompts: ['name', 'title', 'description', 'arguments'],
  instructions: ['instructions'],
  // skills.mdx §Skill Entries: the whole entry; `resources` is what a host verifies files against.
  skills: ['uri', 'frontmatter', 'resources'],
}

/**
 * The instructions a discover or initialize result gives a model: a non-empty string, or none.
 * SECURITY: anything else (a number, an object) is no text anyone reviewed; it counts as none,
 * and the catalog view leaves it out of the answer.
 */
export function instructionsOf(result: Readonly<Record<string, unknown>>): string | undefined {
  const text = result.instructions
  return typeof text === 'string' && text !== '' ? text : undefined
}

/** The model view of a server's instructions: `{}` when it gives none (a lock pins that too). */
export function instructionsView(text: string | undefined): Record<string, unknown> {
  return text === undefined ? {} : { instructions: text }
}

/**
 * What a model reads of one definition: the MODEL_FIELDS present in `item` (absent or undefined
 * fields are omitted; a `null` the backend sent stays, since the model reads it too), in reading
 * order. Values are shared with `item`, not copied.
 */
export function modelView(
  kind: PinnedKind,
  item: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const field of MODEL_FIELDS[kind]) {
    if (Object.hasOwn(item, field) && item[field] !== undefined) out[field] = item[field]
  }
  return out
}

/** 'sha256:' + hex of the canonical JSON (canonicalJson) of modelView. */
export function definitionDigest(
  kind: PinnedKind,
  item: Readonly<Record<string, unknown>>,
): string {
  const text = canonicalJson(modelView(kind, item))
  return `sha256:${createHash('sha256').update(text, 'utf8').digest('hex')}`
}

/**
 * Canonical JSON text of a JSON value, as RFC 8785 (JCS) writes it: object members sorted by key
 * at every level (UTF-16 code unit order, §3.2.3), no whitespace, strings and numbers as
 * ECMAScript's JSON.stringify writes them (§3.2.2; `1.0` is `1`, `-0` is `0`), no Unicode
 * normalisation (a model reads the code points it is sent). Members whose value is undefined are
 * omitted, as JSON.stringify does. Throws on what JSON cannot carry (functions, bigints, NaN).
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return 'null'
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value)
    case 'number':
      if (!Number.isFinite(value)) throw new Error(`not a JSON number: ${value}`)
      return JSON.stringify(value)
    case 'object': {
      if (Array.isArray(value)) {
        return `[${value.map((v: unknown) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`
      }
      const obj = value as Record<string, unknown>
      const keys = Object.keys(obj).sort() // default sort compares UTF-16 code units
      const members: string[] = []
      for (const k of keys) {
        if (obj[k] !== undefined) members.push(`${JSON.stringify(k)}:${canonicalJson(obj[k])}`)
      }
      return `{${members.join(',')}}`
    }
    default:
      throw new Error(`not a JSON value: ${typeof value}`)
  }
}
