import type { McpTarget } from '../mcp/classify.js'
import type { UpstreamPool } from './pool.js'

/** Name patterns of one route, per kind of target, compiled once. */
export interface RoutePatterns {
  readonly tools?: readonly string[] | undefined
  readonly prompts?: readonly string[] | undefined
  readonly resources?: readonly string[] | undefined
}

type Matcher = (name: string) => boolean

/** A route compiled from config: its matchers and its own pool. */
export class Route {
  private readonly tool: Matcher | undefined
  private readonly prompt: Matcher | undefined
  private readonly resource: Matcher | undefined

  constructor(
    patterns: RoutePatterns,
    readonly pool: UpstreamPool,
  ) {
    this.tool = compileMatcher(patterns.tools)
    this.prompt = compileMatcher(patterns.prompts)
    this.resource = compileMatcher(patterns.resources)
  }

  /** True when the target is one this route names. */
  matches(t: McpTarget): boolean {
    if (t.kind === 'tool') return this.tool?.(t.name) === true
    if (t.kind === 'prompt') return this.prompt?.(t.name) === true
    // Event types are served by the server's main pool (docs/events.md).
    if (t.kind === 'method' || t.kind === 'event') return false
    // A skill is reached where its SKILL.md is read (skills.mdx §Skill URIs: the URI of that file).
    return this.resource?.(t.kind === 'skill' ? t.name : t.uri) === true
  }
}

/**
 * The pool for a request: the first route (config order) that names the request's first target
 * (the tool of tools/call, the prompt of prompts/get or a completion ref, the URI of
 * resources/read, the first URI of a listen filter), else undefined for the server's main pool.
 */
export function routeFor(
  routes: readonly Route[],
  targets: readonly McpTarget[],
): UpstreamPool | undefined {
  const t = targets[0]
  if (t === undefined) return undefined
  for (const r of routes) if (r.matches(t)) return r.pool
  return undefined
}

/**
 * `*` matches any run of characters (including none); everything else matches byte for byte, with
 * no case folding or normalisation (tool names are case-sensitive, SEP-986).
 */
function compileMatcher(patterns: readonly string[] | undefined): Matcher | undefined {
  if (patterns === undefined || patterns.length === 0) return undefined
  const exact = new Set(patterns.filter((p) => !p.includes('*')))
  const globs = patterns
    .filter((p) => p.includes('*'))
    .map((p) => new RegExp(`^${p.split('*').map(escapeRegExp).join('[\\s\\S]*')}$`, 'u'))
  if (globs.length === 0) return (name) => exact.has(name)
  return (name) => exact.has(name) || globs.some((g) => g.test(name))
}

function escapeRegExp(s: string): string {
  return s.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&')
}
