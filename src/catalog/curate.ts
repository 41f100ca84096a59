import type { ServerConfig } from '../config/schema.js'
import type { OwnIdentity } from '../client/ask.js'
import { isRecord } from '../mcp/jsonrpc.js'
import type { ListFilter } from '../mcp/list-filter.js'
import { CURATED_ANSWERS } from '../mcp/methods.js'
import { instructionsOf, type CatalogKind, type PinnedKind } from './definition.js'
import { foldName } from './fold.js'
import type { PinState } from './pin-state.js'
import { SkillView } from './skills.js'

/** How one backend definition is shown (config `servers.<name>.tools|prompts.<backendName>`). */
type ItemCuration = ServerConfig['tools'][string]

/** What of a server the catalog view curates and pins (the config keys of that server). */
export type CuratedConfig = Pick<ServerConfig, 'tools' | 'prompts' | 'instructions'> &
  Partial<Pick<ServerConfig, 'skills'>>

/**
 * The answers a catalog view judges, and what in them: a list's items of its kind, and the
 * server's `instructions` in discovery (2026-07-28 server/discover, 2025-era initialize); the
 * method table's `curatedAnswer` column (mcp/methods.ts).
 */
export const CATALOG_LISTS: Readonly<Record<string, PinnedKind>> = CURATED_ANSWERS

/** The curation of one kind (tools or prompts) of one server, compiled once. */
class KindCuration {
  /** curated name → backend name, for renamed definitions only */
  readonly toBackend = new Map<string, string>()

  /** Folded (foldName) backend names clients may not use: hidden or renamed away. */
  private readonly withheld = new Set<string>()

  constructor(readonly byBackend: ReadonlyMap<string, ItemCuration>) {
    for (const [backend, c] of byBackend) {
      if (c.name !== undefined && !c.hidden) this.toBackend.set(c.name, backend)
      if (c.hidden || c.name !== undefined) this.withheld.add(foldName(backend))
    }
  }

  /**
   * The backend name a client's name reaches, or undefined when it is unknown to clients: a
   * backend name that was renamed away, a hidden one, or one a curated name shadows.
   */
  resolve(exposed: string): string | undefined {
    const renamed = this.toBackend.get(exposed)
    if (renamed !== undefined) return renamed
    const own = this.byBackend.get(exposed)
    if (own !== undefined) return own.hidden || own.name !== undefined ? undefined : exposed
    return this.isVariantOfWithheld(exposed) ? undefined : exposed
  }

  /**
   * SECURITY: a backend that matches names loosely (case, compatibility forms, spaces) would run a
   * hidden or renamed-away definition for `DEBUG_DUMP`; such a variant is as unknown as the name.
   */
  private isVariantOfWithheld(name: string): boolean {
    return this.withheld.size > 0 && this.withheld.has(foldName(name))
  }

  /** The name clients see for a backend name, or undefined when they do not see it at all. */
  exposed(backend: string): string | undefined {
    const c = this.byBackend.get(backend)
    if (c?.hidden === true) return undefined
    if (c?.name !== undefined) return c.name
    if (c === undefined && this.isVariantOfWithheld(backend)) return undefined
    // A curated name equal to this backend name shadows it: that name reaches the renamed one.
    return this.toBackend.has(backend) ? undefined : backend
  }
}

/**
 * One server's catalog view (docs/catalog.md §Curation, §Run-time pinning): renames, replaced
 * text, hidden definitions and instructions, and, with `pinning:`, definitions and instructions
 * whose digest is not the pinned one. Everything here depends on the config and the lock only,
 * never on who asks: the rewritten list stays `public`, and the edge cache keeps the rewritten
 * bytes once per cached list (and discovery).
 */
export class ServerCatalog implements ListFilter {
  readonly identityDependent = false
  private readonly kinds: Readonly<Record<CatalogKind, KindCuration>>
  private readonly instructions: CuratedConfig['instructions']
  /** Its skills: curation and pins (catalog/skills.ts). */
  readonly skills: SkillView

  constructor(
    readonly server: string,
    config: CuratedConfig,
    readonly pins: PinState | undefined,
    /** Equal keys rewrite identically: the curation and the pins (list-filter.ts ListFilter.key). */
    readonly key: string,
    /** How the gateway's own reads of this server present themselves (catalog/probe.ts). */
    readonly ownReads: OwnIdentity,
  ) {
    this.kinds = {
      tools: new KindCuration(new Map(Object.entries(config.tools))),
      prompts: new KindCuration(new Map(Object.entries(config.prompts))),
    }
    this.instructions = config.instructions
    const hidden = Object.entries(config.skills ?? {}).flatMap(([uri, c]) =>
      c.hidden ? [uri] : [],
    )
    this.skills = new SkillView(new Set(hidden), pins)
  }

  /** The backend name a client's tool or prompt name reaches; undefined = unknown to clients. */
  resolve(kind: CatalogKind, exposed: string): string | undefined {
    return this.kinds[kind].resolve(exposed)
  }

  /** The name clients see for a backend name (explain), or undefined when hidden by config. */
  exposed(kind: CatalogKind, backend: string): string | undefined {
    return this.kinds[kind].exposed(backend)
  }

  /**
   * The list result clients see. Runs after the policy filter (which judges backend names) and
   * before anything renames items for a virtual server. Learns each definition's digest on the way
   * (pin-state.ts): a list is where the gateway sees what the backend now says.
   */
  apply(method: string, result: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const kind = Object.hasOwn(CATALOG_LISTS, method) ? CATALOG_LISTS[method] : undefined
    if (kind === undefined) return { ...result }
    if (kind === 'instructions') return this.withInstructions(result)
    if (kind === 'skills') return this.skills.apply(method, result)
    const items = result[kind]
    if (!Array.isArray(items)) return { ...result }
    const curation = this.kinds[kind]
    const out: Record<string, unknown>[] = []
    for (const item of items as unknown[]) {
      // SECURITY: an item without a readable name is dropped, never shown unjudged.
      if (!isRecord(item) || typeof item.name !== 'string') continue
      const name = item.name
      if (this.pins !== undefined && !this.pins.visible(kind, name, item)) continue
      const shown = curation.exposed(name)
      if (shown === undefined) continue
      const c = curation.byBackend.get(name)
      out.push(c === undefined ? item : curated(item, shown, c))
    }
    return { ...result, [kind]: out }
  }

  /**
   * A discovery result with the instructions clients may read: the backend's, judged against
   * their pin as a listed definition is (before curation: the pin is of what the backend says),
   * then the configured text in their place, or none when hidden. Never text nobody reviewed:
   * drifted instructions are left out (onDrift: hide), and so are instructions that are no text.
   */
  private withInstructions(result: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const out: Record<string, unknown> = { ...result }
    // SECURITY: the backend's value goes; only what is judged below is put back.
    delete out.instructions
    let shown = instructionsOf(result)
    // SECURITY: instructions whose digest is not their pin are left out (onDrift: hide).
    if (this.pins !== undefined && !this.pins.instructionsVisible(shown)) shown = undefined
    const c = this.instructions
    if (c?.hidden === true) shown = undefined
    else if (c?.text !== undefined) shown = c.text
    if (shown !== undefined) out.instructions = shown
    return out
  }
}

/** A copy of a definition with the configured name and text in place of the backend's. */
function curated(
  item: Readonly<Record<string, unknown>>,
  name: string,
  c: ItemCuration,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...item, name }
  if (c.title !== undefined) out.title = c.title
  if (c.description !== undefined) out.description = c.description
  if ('annotations' in c && c.annotations !== undefined) out.annotations = { ...c.annotations }
  return out
}
