import type { PinningConfig } from '../config/schema.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { enclosingSkills } from '../mcp/skill-paths.js'
import type { DriftEvent } from '../observability/audit.js'
import { foldName } from './fold.js'
import {
  definitionDigest,
  instructionsView,
  type CatalogKind,
  type PinnedKind,
} from './definition.js'
import type { LockedDefinition, ServerLock } from './lock.js'

/** Where drift goes: the audit log and a metric (wired by the runtime). */
export type DriftReporter = (event: DriftEvent) => void

/** Whether a call may reach a backend name, as far as its pin is concerned. */
type PinCall = 'yes' | 'no' | 'unseen'

/** What a pinned skill manifest says of one file: its digest and size (skills.mdx §Resources). */
export interface PinnedFile {
  readonly digest: string
  readonly size: number
}

/**
 * Names remembered per kind. A backend that lists ever new names cannot grow this without bound;
 * a name past the cap is judged as not seen (a call then waits for a list: catalog/probe.ts).
 */
const MAX_SEEN = 10_000

/** The name a server's instructions are judged and reported under (it has one set of them). */
const INSTRUCTIONS = 'instructions'
const NO_PINS: ServerLock = { tools: new Map(), prompts: new Map() }
/** The pin of a server the lock names without instructions: it gave none when reviewed. */
const NO_INSTRUCTIONS: LockedDefinition = {
  digest: definitionDigest('instructions', instructionsView(undefined)),
  definition: instructionsView(undefined),
}

/**
 * The pins of one server and what its lists have shown since this runtime started. Lists are
 * judged item by item against the lock (stateless, so a list is never shown unjudged); calls are
 * judged by the last digest a list showed for the name, since a call does not carry the definition.
 */
export class PinState {
  private readonly seen: Record<CatalogKind | 'skills', Map<string, string>> = {
    tools: new Map(),
    prompts: new Map(),
    skills: new Map(),
  }
  /** Drifted names and the digest last reported for each (one report per new digest). */
  private readonly drifted: Record<PinnedKind, Map<string, string>> = {
    tools: new Map(),
    prompts: new Map(),
    instructions: new Map(),
    skills: new Map(),
  }
  /** Every file the pinned skills list, by URI (the first manifest naming it). */
  private readonly files = new Map<string, PinnedFile>()

  /** Pinned names by fold (curate.ts foldName), to refuse loose variants of them. */
  private readonly folded: Record<CatalogKind, ReadonlySet<string>>
  private readonly lock: ServerLock
  /** The pin of the server's instructions; undefined when the lock does not name the server. */
  private readonly instructions: LockedDefinition | undefined

  /** `lock` is undefined for a server the lock does not name: everything it says is new. */
  constructor(
    readonly server: string,
    lock: ServerLock | undefined,
    readonly mode: Pick<PinningConfig, 'onDrift' | 'newTools'>,
    private readonly report: DriftReporter,
  ) {
    this.lock = lock ?? NO_PINS
    this.instructions = lock === undefined ? undefined : (lock.instructions ?? NO_INSTRUCTIONS)
    const fold = (m: ReadonlyMap<string, unknown>): Set<string> =>
      new Set([...m.keys()].map(foldName))
    this.folded = { tools: fold(this.lock.tools), prompts: fold(this.lock.prompts) }
    for (const pin of this.lock.skills?.values() ?? []) {
      const listed = pin.definition.resources
      if (!Array.isArray(listed)) continue
      for (const f of listed as unknown[]) {
        if (!isRecord(f) || typeof f.uri !== 'string' || this.files.has(f.uri)) continue
        if (typeof f.digest === 'string' && typeof f.size === 'number')
          this.files.set(f.uri, { digest: f.digest, size: f.size })
      }
    }
  }

  /** The pin of a backend name, if the lock has one. */
  pin(kind: CatalogKind, name: string): LockedDefinition | undefined {
    return this.lock[kind].get(name)
  }

  /** Whether a listed definition is shown; records what the list said. */
  visible(kind: CatalogKind, name: string, item: Readonly<Record<string, unknown>>): boolean {
    const digest = definitionDigest(kind, item)
    const pin = this.pin(kind, name)
    this.observe(kind, name, digest, pin)
    if (pin === undefined) return this.mode.newTools === 'allow'
    // SECURITY: what a model reads changed after review; hidden until re-pinned (onDrift: hide).
    return pin.digest === digest || this.mode.onDrift === 'warn'
  }

  /**
   * Whether the instructions a server gave (undefined: none) may be shown, judged as a listed
   * definition is: their digest against the pin (onDrift), or, for a server the lock does not
   * name, newTools. Records what the server said, so a change is reported once per new text.
   */
  instructionsVisible(text: string | undefined): boolean {
    const view = instructionsView(text)
    const digest = definitionDigest('instructions', view)
    const pin = this.instructions
    this.observe('instructions', INSTRUCTIONS, digest, pin)
    if (pin === undefined) return this.mode.newTools === 'allow'
    // SECURITY: what a model reads as the server's own word changed after review (onDrift: hide).
    return pin.digest === digest || this.mode.onDrift === 'warn'
  }

  /** The pin of a skill, by the URI of its SKILL.md. */
  skillPin(uri: string): LockedDefinition | undefined {
    return this.lock.skills?.get(uri)
  }

  /**
   * Whether a skill entry (of skills/list or skills/get) is shown, judged as a listed definition
   * is: its manifest's digest against the pin (onDrift), or newTools for one the lock does not
   * name. Records what the server said.
   */
  skillVisible(uri: string, entry: Readonly<Record<string, unknown>>): boolean {
    const digest = definitionDigest('skills', entry)
    const pin = this.skillPin(uri)
    this.observe('skills', uri, digest, pin)
    if (pin === undefined) return this.mode.newTools === 'allow'
    // SECURITY: the files or frontmatter changed after review; hidden until re-pinned.
    return pin.digest === digest || this.mode.onDrift === 'warn'
  }

  /** Whether a skills/get may go on: the skill's last listed manifest against its pin. */
  skillCallable(uri: string): PinCall {
    const pin = this.skillPin(uri)
    if (pin === undefined) return this.mode.newTools === 'allow' ? 'yes' : 'no'
    if (this.mode.onDrift === 'warn') return 'yes'
    const seen = this.seen.skills.get(uri)
    if (seen === undefined) return 'unseen'
    return seen === pin.digest ? 'yes' : 'no'
  }

  /** What the pinned manifests say of a file, when one lists it. */
  pinnedFile(uri: string): PinnedFile | undefined {
    return this.files.get(uri)
  }

  /**
   * Whether a file no pinned manifest lists belongs to a skill nobody reviewed: one under a pinned
   * skill's directory (added since the pin; skills.mdx §The Acting Window: an unlisted file is a
   * change to the skill), or under a skill a listing showed that the lock does not name
   * (newTools). Undefined URIs too deep to tell count as unreviewed.
   */
  unreviewedFile(uri: string, directory = false): boolean {
    if (directory || this.files.has(uri)) return false
    const skills = enclosingSkills(uri)
    if (skills === undefined) return this.lock.skills !== undefined && this.lock.skills.size > 0
    for (const s of skills) {
      if (this.skillPin(s) !== undefined) return this.mode.onDrift === 'hide'
      if (this.seen.skills.has(s)) return this.mode.newTools === 'hide'
    }
    return false
  }

  /** Whether a call to a backend name may go on: its last listed digest against its pin. */
  callable(kind: CatalogKind, name: string): PinCall {
    const pin = this.pin(kind, name)
    if (pin === undefined) {
      // SECURITY: a loose variant of a pinned name (case, spaces) would reach the pinned
      // definition at a backend that matches loosely, drifted or not.
      if (this.folded[kind].has(foldName(name))) return 'no'
      return this.mode.newTools === 'allow' ? 'yes' : 'no'
    }
    if (this.mode.onDrift === 'warn') return 'yes'
    const seen = this.seen[kind].get(name)
    if (seen === undefined) return 'unseen'
    return seen === pin.digest ? 'yes' : 'no'
  }

  /** Definitions whose last listed digest is not their pin, for the admin /readyz (names only, never text). */
  driftedNames(): { readonly kind: PinnedKind; readonly name: string }[] {
    const out: { kind: PinnedKind; name: string }[] = []
    for (const kind of ['instructions', 'tools', 'prompts', 'skills'] as const)
      for (const name of this.drifted[kind].keys()) out.push({ kind, name })
    return out
  }

  /** Names a list showed that the lock does not pin (new since review), for the status page. */
  unpinnedNames(): { readonly kind: CatalogKind | 'skills'; readonly name: string }[] {
    const out: { kind: CatalogKind | 'skills'; name: string }[] = []
    for (const kind of ['tools', 'prompts'] as const)
      for (const name of this.seen[kind].keys())
        if (!this.lock[kind].has(name)) out.push({ kind, name })
    for (const uri of this.seen.skills.keys())
      if (this.skillPin(uri) === undefined) out.push({ kind: 'skills', name: uri })
    return out
  }

  private observe(
    kind: PinnedKind,
    name: string,
    digest: string,
    pin: LockedDefinition | undefined,
  ): void {
    if (kind !== 'instructions') {
      const seen = this.seen[kind]
      if (seen.has(name) || seen.size < MAX_SEEN) seen.set(name, digest)
    }
    if (pin === undefined) return
    const drifted = this.drifted[kind]
    if (pin.digest === digest) {
      drifted.delete(name) // back to what was reviewed
      return
    }
    if (drifted.get(name) === digest) return
    drifted.set(name, digest)
    this.report({
      server: this.server,
      kind,
      name,
      pinned: pin.digest,
      seen: digest,
      action: this.mode.onDrift === 'hide' ? 'hidden' : 'served',
    })
  }
}
