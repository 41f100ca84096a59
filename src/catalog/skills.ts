import { createHash } from 'node:crypto'
import { GatewayError } from '../errors.js'
import type { McpTarget } from '../mcp/classify.js'
import { isRecord } from '../mcp/jsonrpc.js'
import type { ListFilter } from '../mcp/list-filter.js'
import { enclosingSkills } from '../mcp/skill-paths.js'
import type { PinState } from './pin-state.js'

/**
 * A server's skills as its catalog view shows them (docs/catalog.md §Skills): curation hides a
 * skill with its files and the skills nested in it; with `pinning:`, a listed skill is judged by
 * its manifest's digest against the lock (onDrift, newTools, like a tool), and a read of a pinned
 * file is relayed only when its bytes are the pinned ones (skills.mdx §Integrity and
 * Verification: the gateway checks what it relays, so a client is not the only check).
 */
export class SkillView {
  constructor(
    /** SKILL.md URIs hidden by `servers.<name>.skills` curation. */
    private readonly hidden: ReadonlySet<string>,
    private readonly pins: PinState | undefined,
  ) {}

  /** Whether curation hides `uri` (a skill or a file): it, or a skill it is nested in, is hidden. */
  hides(uri: string, directory = false): boolean {
    if (this.hidden.size === 0) return false
    if (this.hidden.has(uri)) return true
    const skills = enclosingSkills(uri, directory)
    // SECURITY: too deep to tell which skills it is in: it may be in a hidden one.
    if (skills === undefined) return true
    return skills.some((s) => this.hidden.has(s))
  }

  /** A skill entry clients may see (curation, then its pin); records what the server listed. */
  shows(entry: unknown): boolean {
    if (!isRecord(entry) || typeof entry.uri !== 'string') return false
    if (this.hides(entry.uri)) return false
    return this.pins === undefined || this.pins.skillVisible(entry.uri, entry)
  }

  /** A skills/list or skills/get result as clients see it. */
  apply(method: string, result: Readonly<Record<string, unknown>>): Record<string, unknown> {
    if (method === 'skills/list') {
      const skills = result.skills
      if (!Array.isArray(skills)) return { ...result }
      return { ...result, skills: skills.filter((s) => this.shows(s)) }
    }
    // SECURITY: an answer whose manifest is not the pinned one (it changed since the skills/get
    // was let through) is refused, never relayed.
    if (method === 'skills/get' && !this.shows(result.skill))
      throw new GatewayError('upstream_pin_mismatch', 'the skill differs from its pin')
    return { ...result }
  }

  /**
   * What a request naming a skill or a skill's file needs before it goes on: the target it is
   * answered as unknown for (a hidden skill or file, a skill whose manifest drifted or nobody
   * pinned, a file no pinned manifest lists under a pinned skill), a check of its answer (the read
   * of a pinned file), or nothing.
   */
  decide(
    method: string | undefined,
    targets: readonly McpTarget[],
  ): { readonly refuse: McpTarget } | { readonly check: ListFilter } | undefined {
    const t = targets[0]
    if (t === undefined) return undefined
    if (t.kind === 'skill') {
      if (this.hides(t.name)) return { refuse: t }
      if (this.pins?.skillCallable(t.name) === 'no') return { refuse: t }
      return undefined
    }
    if (t.kind !== 'resource') return undefined
    const directory = t.directory === true
    if (this.hides(t.uri, directory)) return { refuse: t }
    const pins = this.pins
    if (pins === undefined || (method !== 'resources/read' && !directory)) return undefined
    if (pins.unreviewedFile(t.uri, directory)) return { refuse: t }
    // onDrift: warn serves what changed, as it serves a changed definition (reported by lists).
    const pinned = pins.mode.onDrift === 'hide' ? pins.pinnedFile(t.uri) : undefined
    return pinned === undefined ? undefined : { check: new PinnedRead(t.uri, pinned) }
  }
}

/**
 * A resources/read of a pinned skill file: every content of the answer is that file, with the
 * pinned size and digest (skills.mdx §Verification on Read: the SHA-256 of the raw bytes, text
 * as UTF-8, a blob base64-decoded). Anything else is refused (502 `upstream_pin_mismatch`).
 */
class PinnedRead implements ListFilter {
  readonly identityDependent = false
  readonly key: string

  constructor(
    private readonly uri: string,
    private readonly pinned: { readonly digest: string; readonly size: number },
  ) {
    this.key = `pinned:${pinned.digest}:${uri}`
  }

  apply(_method: string, result: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const contents = result.contents
    if (!Array.isArray(contents)) throw mismatch(this.uri, 'no contents')
    for (const c of contents as unknown[]) {
      if (!isRecord(c) || c.uri !== this.uri) throw mismatch(this.uri, 'another resource')
      const bytes =
        typeof c.text === 'string'
          ? Buffer.from(c.text, 'utf8')
          : typeof c.blob === 'string'
            ? Buffer.from(c.blob, 'base64')
            : undefined
      if (bytes === undefined) throw mismatch(this.uri, 'no text or blob')
      const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`
      // A length that differs is a mismatch whether or not the digest is computed (§Resources).
      if (bytes.length !== this.pinned.size || digest !== this.pinned.digest)
        throw mismatch(this.uri, `${bytes.length} bytes hashing to ${digest}`)
    }
    return { ...result }
  }
}

function mismatch(uri: string, what: string): GatewayError {
  return new GatewayError('upstream_pin_mismatch', `${uri}: ${what}, not the pinned content`)
}
