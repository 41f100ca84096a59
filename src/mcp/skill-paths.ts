/**
 * Where a resource sits among a server's skills (the skills extension, skills.mdx §Resource
 * Mapping): a skill is the directory that holds its SKILL.md, addressed as
 * `<scheme>://<skill-path>/SKILL.md`, its files are the resources under that directory, and
 * skills nest (§Nested Skills: a nested skill's files are its enclosing skill's files too). So the
 * skills a resource may belong to are the SKILL.md URIs of the directories above it, whichever of
 * them the server actually serves: policy (docs/policy.md §Skills) and the cache's invalidation
 * judge a resource by all of them, never by a guess at which one is real.
 */

/** The skill file every skill directory holds (skills.mdx §Skill Format). */
const SKILL_FILE = 'SKILL.md'

/**
 * Directories above a resource the gateway looks at, at most. Deeper URIs are judged as a skill
 * nobody allows (policy denies them when skill rules apply), so a long path cannot make one
 * decision cost a lookup per segment without bound.
 */
const MAX_SKILL_DEPTH = 32

/**
 * The SKILL.md URI of every directory above `uri`, outermost first; with `directory`, `uri` names
 * a directory (a `resources/directory/read`), whose own SKILL.md is included. A skill's own SKILL.md
 * URI is its last entry. Undefined when `uri` has more than MAX_SKILL_DEPTH directories; empty for
 * a URI without `scheme://` or without a directory (`skill://a` read as a file).
 */
export function enclosingSkills(uri: string, directory = false): string[] | undefined {
  const start = uri.indexOf('://')
  if (start <= 0) return []
  const base = start + 3
  // The path ends at a query or fragment (RFC 3986 §3.3); skill URIs carry neither.
  let end = uri.length
  for (let i = base; i < uri.length; i++) {
    const c = uri.charCodeAt(i)
    if (c === 0x3f || c === 0x23) {
      end = i
      break
    }
  }
  if (directory) while (end > base && uri.charCodeAt(end - 1) === 0x2f) end--
  const out: string[] = []
  for (let i = base; i < end; i++) {
    if (uri.charCodeAt(i) !== 0x2f || i === base) continue
    if (out.length === MAX_SKILL_DEPTH) return undefined
    out.push(`${uri.slice(0, i)}/${SKILL_FILE}`)
  }
  if (directory && end > base) {
    if (out.length === MAX_SKILL_DEPTH) return undefined
    out.push(`${uri.slice(0, end)}/${SKILL_FILE}`)
  }
  return out
}
