import type { VirtualServerConfig } from '../config/schema.js'
import type { McpTarget } from '../mcp/classify.js'
import { compilePattern } from '../policy/pattern.js'
import { prefixedName } from './names.js'

/** A member that may serve a target named on a virtual server, and the target in its own name. */
export interface MemberTarget {
  readonly member: string
  readonly target: McpTarget
  /** How the member was found: a prefix, a `resources:` route, or any member (a bare name). */
  readonly via: 'prefix' | 'resources' | 'any'
}

/**
 * Which members a target named on a virtual server can reach, offline (for `mcp-edge explain`):
 * a tool or prompt name that is some member's prefixed form (shortened ones included) belongs to
 * that member under its own name; a bare name can be any member's (at run time the members'
 * lists decide); a URI goes where `resources:` routes it, else to any member that serves it.
 */
export function memberTargets(v: VirtualServerConfig, target: McpTarget): MemberTarget[] {
  if (target.kind === 'resource') {
    const routed = Object.entries(v.resources).find(([p]) => compilePattern(p)(target.uri))
    if (routed !== undefined) return [{ member: routed[1], target, via: 'resources' }]
    return v.members.map((member) => ({ member, target, via: 'any' }))
  }
  if (target.kind === 'tool' || target.kind === 'prompt') {
    const prefixed: MemberTarget[] = []
    for (const member of v.members) {
      const own = ownName(member, target.name)
      if (own !== undefined)
        prefixed.push({ member, target: { kind: target.kind, name: own }, via: 'prefix' })
    }
    if (prefixed.length > 0 || v.prefix === 'always') return prefixed
  }
  return v.members.map((member) => ({ member, target, via: 'any' }))
}

/** The own name whose prefixed form (on `member`) is `exposed`, if any. */
function ownName(member: string, exposed: string): string | undefined {
  const cut = exposed.indexOf('_')
  for (let i = cut; i !== -1; i = exposed.indexOf('_', i + 1)) {
    const own = exposed.slice(i + 1)
    if (own !== '' && prefixedName(member, own) === exposed) return own
  }
  return undefined
}
