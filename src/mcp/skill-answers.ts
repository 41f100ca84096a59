import { GatewayError } from '../errors.js'
import { isRecord } from './jsonrpc.js'
import type { ListFilter } from './list-filter.js'

/**
 * The per-skill limits every host must accept and no server should exceed (skills.mdx §Limits):
 * the entries of a skill's `resources`, SKILL.md included, and the sum of their sizes.
 */
export const SKILL_LIMITS = { files: 512, bytes: 16 * 1024 * 1024 } as const

/**
 * Why a skill entry may not be relayed (skills.mdx §Skill Entries), or undefined when it may: an
 * entry that is no object or has no string `uri`, whose `resources` is neither an array nor
 * `"dynamic"`, lists a file without a string `uri` or a size that is no byte count, or exceeds
 * SKILL_LIMITS. Checkable from the entry alone, before any file is read (§Limits).
 */
export function skillEntryProblem(entry: unknown): string | undefined {
  if (!isRecord(entry) || typeof entry.uri !== 'string') return 'an entry without a string uri'
  const files = entry.resources
  if (files === 'dynamic') return undefined
  if (!Array.isArray(files)) return `${entry.uri}: resources is neither a list nor "dynamic"`
  if (files.length > SKILL_LIMITS.files)
    return `${entry.uri}: ${files.length} files, over the limit of ${SKILL_LIMITS.files} per skill`
  let bytes = 0
  for (const f of files as unknown[]) {
    if (!isRecord(f) || typeof f.uri !== 'string') return `${entry.uri}: a file without a uri`
    const size = f.size
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0)
      return `${entry.uri}: ${f.uri} has no byte count`
    bytes += size
  }
  if (bytes > SKILL_LIMITS.bytes)
    return `${entry.uri}: ${bytes} bytes, over the limit of ${SKILL_LIMITS.bytes} per skill`
  return undefined
}

/**
 * What the gateway relays of a skills answer, whatever the policy (one per request): a
 * `skills/list` keeps only entries skillEntryProblem passes (an oversized or malformed skill is
 * left out, as a host that declines it would); a `skills/get` answer whose entry fails, or names
 * another skill than `asked` (the one admission judged), is refused with a clear error
 * (`upstream_skill_refused`, 502) rather than relayed.
 */
export class SkillAnswers implements ListFilter {
  readonly identityDependent = false
  readonly key: string

  constructor(private readonly asked: string | undefined) {
    this.key = asked === undefined ? 'skills' : `skills:${asked}`
  }

  apply(method: string, result: Readonly<Record<string, unknown>>): Record<string, unknown> {
    if (method === 'skills/list') {
      const skills = result.skills
      if (!Array.isArray(skills)) return { ...result }
      return { ...result, skills: skills.filter((s) => skillEntryProblem(s) === undefined) }
    }
    if (method !== 'skills/get') return { ...result }
    const skill = result.skill
    const problem = skillEntryProblem(skill)
    if (problem !== undefined) throw new GatewayError('upstream_skill_refused', problem)
    const uri = (skill as { uri: string }).uri
    // SECURITY: the entry relayed is the skill policy judged, never another one.
    if (this.asked !== undefined && uri !== this.asked)
      throw new GatewayError(
        'upstream_skill_refused',
        `asked for ${JSON.stringify(this.asked)}, the answer is ${JSON.stringify(uri)}`,
      )
    return { ...result }
  }
}
