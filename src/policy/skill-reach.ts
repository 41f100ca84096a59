import type { McpTarget } from '../mcp/classify.js'
import { enclosingSkills } from '../mcp/skill-paths.js'
import type { TargetKind } from './compile.js'

/** One name a rule's patterns are matched against: the patterns of `kind` on `value`. */
export type ReachKey = readonly [kind: TargetKind, value: string]

/** The names whose deny patterns and whose allow patterns decide a target. */
export interface Reach {
  readonly deny: readonly ReachKey[]
  readonly allow: readonly ReachKey[]
}

/** The scheme the skills extension serves skill files under (skills.mdx §Resource Mapping). */
const SKILL_SCHEME = 'skill://'

/**
 * Which patterns decide a skill or a resource that may be a skill's file (docs/policy.md
 * §Skills); undefined for every other target, which only its own patterns decide.
 *
 * - A skill (its SKILL.md URI) is allowed by `skills` patterns on its own URI only: approval is
 *   per skill and never covers a nested one (skills.mdx §Nested Skills). It is denied by `skills`
 *   patterns on its own URI and on every skill it is nested in: the files of a denied skill,
 *   nested skills included, are unknown too.
 * - A resource is denied by `resources` patterns on its URI and by `skills` patterns on every
 *   skill it may belong to (mcp/skill-paths.ts). Under `skill://` it is a skill's file, allowed
 *   only by `skills` patterns on one of those skills (an enclosing skill's approval covers its
 *   nested skills' files, which are its own supporting files); under any other scheme (a skill
 *   served as `github://…`) by `resources` patterns, as before: no URI is taken for a skill's
 *   file by its scheme alone (skills.mdx §Resource Mapping) except the extension's own.
 * - A resource or skill nested deeper than mcp/skill-paths.ts looks is allowed by nothing.
 *
 * `skillRules` says whether any rule for the server names skills; when none does, a resource
 * outside `skill://` is decided by its own patterns alone (undefined: no lookups per ancestor).
 */
export function reachOf(target: McpTarget, skillRules: boolean): Reach | undefined {
  if (target.kind === 'skill') {
    const own: ReachKey = ['skill', target.name]
    const enclosing = enclosingSkills(target.name)
    if (enclosing === undefined) return { deny: [own], allow: [] }
    const deny = enclosing.map((s): ReachKey => ['skill', s])
    if (!enclosing.includes(target.name)) deny.push(own)
    return { deny, allow: [own] }
  }
  if (target.kind !== 'resource') return undefined
  const uri = target.uri
  const skillFile = uri.startsWith(SKILL_SCHEME)
  if (!skillFile && !skillRules) return undefined
  const own: ReachKey = ['resource', uri]
  const skills = enclosingSkills(uri, target.directory === true)
  // SECURITY: too deep to tell which skills it belongs to: no rule can say it is allowed.
  if (skills === undefined) return { deny: [own], allow: [] }
  if (skills.length === 0 && !skillFile) return undefined
  const asSkills = skills.map((s): ReachKey => ['skill', s])
  return { deny: [own, ...asSkills], allow: skillFile ? asSkills : [own] }
}

/** A URI's scheme and `://` (RFC 3986 §3.1), as a skill's SKILL.md URI begins. */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//
/** What a head of a pattern may be when it holds a `/`: a scheme, then `/` or `//`. */
const SCHEME_HEAD = /^[A-Za-z][A-Za-z0-9+.-]*:\/(?:\/|$)/
const SKILL_SUFFIX = '/SKILL.md'

/**
 * Why a `skills` pattern can match no skill, or undefined when it can: skills are named by the URI
 * of their SKILL.md, `<scheme>://<skill-path>/SKILL.md` (skills.mdx §Resource Mapping), so a
 * pattern that can match no such URI (a directory, a supporting file, no scheme, `skill.md` in
 * lower case) allows or denies nothing, and is a mistake `mcp-edge check` reports.
 */
export function skillPatternProblem(pattern: string): string | undefined {
  const parts = pattern.split('*')
  const head = parts[0] ?? ''
  const tail = parts[parts.length - 1] ?? ''
  const exact = parts.length === 1
  const hint = exact
    ? ` (did you mean ${JSON.stringify(`${pattern.replace(/\/+$/, '')}${SKILL_SUFFIX}`)}?)`
    : ''
  if (exact ? !SCHEME.test(pattern) : head.includes('/') && !SCHEME_HEAD.test(head))
    return `${JSON.stringify(pattern)} can match no skill: a skill is named by its SKILL.md URI, scheme included (skill://…/SKILL.md)`
  const fits = exact
    ? pattern.endsWith(SKILL_SUFFIX) &&
      pattern.length > pattern.indexOf('://') + 3 + SKILL_SUFFIX.length
    : SKILL_SUFFIX.endsWith(tail) || tail.endsWith(SKILL_SUFFIX)
  if (fits) return undefined
  return `${JSON.stringify(pattern)} can match no skill: a skill is named by the URI of its SKILL.md, which also decides its files${hint}`
}
