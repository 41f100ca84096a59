import type { VirtualServerConfig } from '../config/schema.js'
import type { McpTarget } from '../mcp/classify.js'
import { compilePattern } from '../match/pattern.js'
import { prefixedName, shortenedStart } from './names.js'
import { prefixedUri } from './uri-names.js'

/** A member that may serve a target named on a virtual server, and the target in its own name. */
export interface MemberTarget {
  readonly member: string
  readonly target: McpTarget
  /**
   * How the member was found: a prefix, a `resources:` route, any member (a bare name), or a
   * shortened name (its own name's start only; the rest is in the member's list).
   */
  readonly via: 'prefix' | 'resources' | 'any' | 'shortened'
  /** The name clients see on the virtual server, when it is not the target's own. */
  readonly exposed?: string | undefined
}

/**
 * Which members a target named on a virtual server can reach, offline (for `mcp-edge explain`):
 * a tool or prompt name that is some member's prefixed form (shortened ones included) belongs to
 * that member under its own name; a bare name can be any member's (at run time the members'
 * lists decide); a URI goes where `resources:` routes it, else to any member that serves it.
 */
export function memberTargets(v: VirtualServerConfig, target: McpTarget): MemberTarget[] {
  // A skill, or a skill's or an app's file: a member's name as its first segment is that
  // member's own URI under a prefix (virtual/uri-names.ts); else any member may serve it.
  const renamed =
    target.kind === 'skill'
      ? target.name
      : target.kind === 'resource' && /^(skill|ui):\/\//.test(target.uri)
        ? target.uri
        : undefined
  if (renamed !== undefined) {
    const prefixed = v.members.flatMap((member): MemberTarget[] => {
      const at = renamed.indexOf('://')
      const head = `${renamed.slice(0, at + 3)}${member}/`
      if (!renamed.startsWith(head)) return []
      const own = `${renamed.slice(0, at + 3)}${renamed.slice(head.length)}`
      if (prefixedUri(member, own) !== renamed) return []
      const ownTarget: McpTarget =
        target.kind === 'skill' ? { kind: 'skill', name: own } : { kind: 'resource', uri: own }
      return [{ member, target: ownTarget, via: 'prefix', exposed: renamed }]
    })
    if (prefixed.length > 0) return prefixed
  }
  if (target.kind === 'resource') {
    const routed = Object.entries(v.resources).find(([p]) => compilePattern(p)(target.uri))
    if (routed !== undefined) return [{ member: routed[1], target, via: 'resources' }]
    return v.members.map((member) => ({ member, target, via: 'any' }))
  }
  if (target.kind === 'tool' || target.kind === 'prompt') {
    const prefixed: MemberTarget[] = []
    for (const member of v.members) {
      const kind = target.kind
      const start = shortenedStart(member, target.name)
      // A fully shortened name is that (its tail only looks like a hash-prefixed own name).
      const own = start === undefined ? ownName(member, target.name) : undefined
      if (own !== undefined)
        prefixed.push({ member, target: { kind, name: own }, via: 'prefix', exposed: target.name })
      if (start !== undefined)
        prefixed.push({
          member,
          target: { kind, name: start },
          via: 'shortened',
          exposed: target.name,
        })
    }
    if (prefixed.length > 0) return prefixed
    // A member's own name: under `always` it is exposed prefixed (or shortened), else as it is
    // unless it collides (the members' lists decide at run time).
    return v.members.map((member) => ({
      member,
      target,
      via: 'any',
      exposed: v.prefix === 'always' ? prefixedName(member, target.name) : undefined,
    }))
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
