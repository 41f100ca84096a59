import { GatewayError } from '../errors.js'
import type { McpTarget } from '../mcp/classify.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { chainFilters, type ListFilter } from '../mcp/list-filter.js'
import { replaceParam } from '../mcp/rewrite.js'
import { routeUri } from './handle-calls.js'
import { refreshKinds } from './handle-lists.js'
import { denied, type Answer, type MemberServer, type VirtualRequest } from './request.js'
import { admitted, forwardTo } from './route.js'
import type { ListKind } from './state.js'
import { prefixedUri } from './uri-names.js'

/**
 * Requests that name a URI under a member's renamed root (virtual/uri-names.ts: skills and MCP
 * Apps' `ui://` resources; docs/virtual-servers.md §Skills and MCP Apps): `skills/get`,
 * `resources/read` and `resources/directory/read`. Each goes to the member the exposed URI leads
 * to, with the member's own URI in `params.uri` (that one value replaced in the client's bytes)
 * and `Mcp-Name`, is judged by that member's admission and catalog on its own URI, and its answer
 * comes back with the member's URIs under their exposed names.
 */

/** skills/get: the skill the exposed SKILL.md URI leads to; unknown when none does. */
export function getSkill(r: VirtualRequest): Promise<Answer> {
  return byUri(r, 'skill')
}

/** resources/read: a renamed root's member first, else as any resource is routed. */
export function readResource(r: VirtualRequest): Promise<Answer> {
  return byUri(r, 'file')
}

/** resources/directory/read: as a read, of a directory (its own skill counts for policy). */
export function readDirectory(r: VirtualRequest): Promise<Answer> {
  return byUri(r, 'directory')
}

type UriRequest = 'skill' | 'file' | 'directory'

async function byUri(r: VirtualRequest, what: UriRequest): Promise<Answer> {
  const uri = r.message.params?.uri
  if (typeof uri !== 'string') throw new GatewayError('invalid_params', 'params.uri is required')
  const exposed = targetOf(what, uri)
  const routed = await routeRooted(r, uri, what)
  let member: MemberServer | undefined
  let own = uri
  if (routed !== undefined) {
    member = r.v.members[routed.member]
    own = routed.own
  } else if (what !== 'skill') {
    // Not under a renamed root: routed as any resource is (docs/virtual-servers.md §Routing).
    member = await routeUri(r, uri)
  }
  if (member === undefined) return denied(r, exposed, 'virtual_unknown_name')
  const target = targetOf(what, own)
  // The member's own curation and pins, as its own endpoint's catalog stage applies them.
  const decided = member.catalog?.skills.decide(r.method, [target])
  if (decided !== undefined && 'refuse' in decided) return denied(r, exposed, 'catalog_skill')
  let text = r.text
  if (own !== uri) {
    // SECURITY: only this one value changes; the rest of the body is the client's, byte for byte.
    const rewritten = replaceParam(r.text, ['uri'], own)
    if (rewritten === undefined) throw new GatewayError('invalid_params', 'ambiguous params')
    text = rewritten
  }
  // Mcp-Name names the resource of a read (SEP-2243); the skills extension defines none for its
  // methods, and one a client sent anyway names the member's own URI.
  const name = what === 'file' || r.call.head.name !== undefined ? own : undefined
  const index = r.v.members.indexOf(member)
  const catalog =
    decided !== undefined ? decided.check : what === 'skill' ? member.catalog : undefined
  // An unprefixed root's URIs are its member's own: nothing to put back.
  const back = own === uri ? undefined : new ExposedUris(r, index)
  return admitted(r, member, target, exposed, (admission) =>
    forwardTo(r, member, text, [target], name, {
      listFilter: chainFilters(chainFilters(admission.listFilter, catalog), back),
    }),
  )
}

function targetOf(what: UriRequest, uri: string): McpTarget {
  if (what === 'skill') return { kind: 'skill', name: uri }
  return what === 'directory'
    ? { kind: 'resource', uri, directory: true }
    : { kind: 'resource', uri }
}

/** The lists whose answers teach the roots a URI may be under. */
function kindsFor(uri: string): readonly ListKind[] {
  return uri.startsWith('ui://') ? ['tools', 'resources'] : ['skills', 'resources']
}

/**
 * The member and own URI of an exposed one under a renamed root: from what the lists said,
 * reading them again once when they are not fresh (single flight, throttled: handle-lists.ts);
 * else, for a skill or a `skill://` / `ui://` resource no list named (skills.mdx: a skill need not
 * be listed to be served), by a member's name as its first segment, as a prefix would put it.
 */
async function routeRooted(
  r: VirtualRequest,
  uri: string,
  what: UriRequest,
): Promise<{ readonly member: number; readonly own: string } | undefined> {
  const state = r.v.state
  let found = state.routeUri(uri)
  if (found !== undefined) return found
  const renamed = what === 'skill' || uri.startsWith('skill://') || uri.startsWith('ui://')
  if (!renamed) return undefined
  await refreshKinds(r, kindsFor(uri))
  found = state.routeUri(uri)
  if (found !== undefined || state.mode === 'never') return found
  const at = uri.indexOf('://')
  if (at <= 0) return undefined
  const rest = uri.slice(at + 3)
  const slash = rest.indexOf('/')
  if (slash <= 0) return undefined
  const member = r.v.memberNames.indexOf(rest.slice(0, slash))
  if (member === -1) return undefined
  const own = `${uri.slice(0, at + 3)}${rest.slice(slash + 1)}`
  // Only where the prefix is this member's name for that URI (never another member's root).
  return prefixedUri(r.v.memberNames[member] as string, own) === uri ? { member, own } : undefined
}

/**
 * A member's answer with its URIs under their exposed names, as lists show them: a skill entry's
 * `uri` and files, a read's `contents`, a directory's children (a child under no reachable name is
 * left out). Runs last, after the member's own checks have judged its own URIs.
 */
class ExposedUris implements ListFilter {
  readonly identityDependent = false
  readonly key: string

  constructor(
    private readonly r: VirtualRequest,
    private readonly member: number,
  ) {
    this.key = `uris:${member}`
  }

  apply(method: string, result: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const expose = (uri: unknown): string | undefined =>
      typeof uri === 'string' ? this.r.v.state.exposeUri(this.member, uri) : undefined
    const each = (items: unknown, keep: boolean): unknown[] | undefined => {
      if (!Array.isArray(items)) return undefined
      const out: unknown[] = []
      for (const item of items as unknown[]) {
        if (!isRecord(item)) continue
        const shown = expose(item.uri)
        if (shown === undefined) {
          if (keep) throw new GatewayError('upstream_skill_refused', 'a URI under no exposed name')
          continue
        }
        out.push(shown === item.uri ? item : { ...item, uri: shown })
      }
      return out
    }
    if (method === 'skills/get' && isRecord(result.skill)) {
      const skill = result.skill
      const uri = expose(skill.uri)
      const files = skill.resources === 'dynamic' ? 'dynamic' : each(skill.resources, true)
      if (uri === undefined) throw new GatewayError('upstream_skill_refused', 'no exposed name')
      return {
        ...result,
        skill: { ...skill, uri, ...(files !== undefined && { resources: files }) },
      }
    }
    if (method === 'resources/read') return { ...result, contents: each(result.contents, true) }
    if (method === 'resources/directory/read')
      return { ...result, resources: each(result.resources, false) }
    return { ...result }
  }
}
