import { memberBackendName } from '../catalog/member.js'
import { GatewayError } from '../errors.js'
import type { McpRequestInfo, McpTarget } from '../mcp/classify.js'
import { isRecord, peekRawId, type JsonRpcMessage } from '../mcp/jsonrpc.js'
import { replaceParam } from '../mcp/rewrite.js'
import { mayCarryTaskIds } from '../mcp/task-ids.js'
import { refreshKinds, routeName } from './handle-lists.js'
import { denied, valueAt, type Answer, type MemberServer, type VirtualRequest } from './request.js'
import { routeResource } from './resources.js'
import { admitted, forwardTo } from './route.js'
import type { NamedKind } from './state.js'

/**
 * tools/call, prompts/get and the events extension's requests (docs/events.md): the member that
 * serves the exposed name, with its own name.
 */
export async function callByName(
  r: VirtualRequest,
  kind: NamedKind,
  path: readonly string[],
): Promise<Answer> {
  const exposed = valueAt(r.message.params, path)
  if (typeof exposed !== 'string')
    throw new GatewayError('invalid_params', `params.${path.join('.')} is required`)
  const targetKind = kind === 'tools' ? 'tool' : kind === 'prompts' ? 'prompt' : 'event'
  // A known name costs no await (a microtask turn per call on the hot path).
  let route = r.v.state.table(kind).routes.get(exposed) ?? (await routeName(r, kind, exposed))
  // An MCP App calls its own server's tools by their own names (virtual/apps.ts).
  if (route === undefined && kind === 'tools') route = appRoute(r, exposed)
  // An unknown name is answered as the server answers one (in band, no gateway marker).
  if (route === undefined)
    return denied(r, { kind: targetKind, name: exposed }, 'virtual_unknown_name')
  const member = r.v.members[route.member] as MemberServer
  // The prefix is off; the member's curation and pins are undone next, as on its own endpoint.
  const maxBytes = r.ctx.limits.maxInspectBytes
  // A catalog curates tools and prompts only; event types keep the member's names.
  const own =
    member.catalog === undefined || kind === 'events'
      ? route.name
      : await memberBackendName(member, kind, route.name, maxBytes)
  if (own === undefined)
    return denied(r, { kind: targetKind, name: exposed }, 'virtual_unknown_name')
  const target: McpTarget = { kind: targetKind, name: own }
  let text = r.text
  if (own !== exposed) {
    // SECURITY: only this one value changes; the rest of the body is the client's, byte for byte.
    const rewritten = replaceParam(r.text, path, own)
    if (rewritten === undefined) throw new GatewayError('invalid_params', 'ambiguous params')
    text = rewritten
  }
  // Mcp-Name names the tool or prompt for tools/call and prompts/get (SEP-2243); not for completions.
  // The events extension defines none; one a client sent anyway names the member's own type.
  const name =
    r.method === 'completion/complete' || (kind === 'events' && r.call.head.name === undefined)
      ? undefined
      : own
  // Only a call that can create a task has its answer read for task ids (docs/virtual-servers.md
  // "Tasks"); a plain tools/call streams untouched.
  const tasks =
    r.method === 'tools/call' && mayCarryTaskIds(r.method, r.message, r.call.body)
      ? r.v.tasks.sealerFor(member.name, r.principal)
      : undefined
  // A 2025-era client has no way to know a tool's parameter headers, which a 2026-07-28 member
  // requires (spec 2026-07-28 basic/transports/streamable-http §Custom Headers): they are derived
  // from the member's own definition of the tool. SECURITY: for every such call, even of a tool
  // that declares none, so no client `Mcp-Param-*` reaches the member in their place.
  const params =
    r.session !== undefined && r.method === 'tools/call'
      ? r.v.state.paramsOf(route.member, own)
      : undefined
  const asExposed: McpTarget = { kind: targetKind, name: exposed }
  return admitted(r, member, target, asExposed, () =>
    forwardTo(r, member, text, [target], name, { tasks, params }),
  )
}

/**
 * The member an MCP App's tools/call of `name` is for, when `name` is no exposed name: the member
 * whose `ui://` resource the call's `params._meta.ui.resourceUri` names (as a tool names its app:
 * SEP-1865 §Resource Discovery), or else the one member whose app may call a tool of that own
 * name (visibility includes `app`). Two members' apps calling one name, with no resource named,
 * lead to neither: a call never reaches a member the app did not come from by a guess.
 */
function appRoute(r: VirtualRequest, name: string): { member: number; name: string } | undefined {
  const state = r.v.state
  const meta = r.message.params?._meta
  const ui = isRecord(meta) ? meta.ui : undefined
  const named = isRecord(ui) && typeof ui.resourceUri === 'string' ? ui.resourceUri : undefined
  if (named !== undefined) {
    const at = state.routeUri(named)
    const apps = at === undefined ? undefined : state.appsOf(at.member)
    return at !== undefined && apps?.callable.has(name) === true
      ? { member: at.member, name }
      : undefined
  }
  let found: number | undefined
  for (let m = 0; m < r.v.members.length; m++) {
    const apps = state.appsOf(m)
    if (apps === undefined || apps.resources.size === 0 || !apps.callable.has(name)) continue
    if (found !== undefined) return undefined
    found = m
  }
  return found === undefined ? undefined : { member: found, name }
}

/** The message of a call judged on its headers: its body is forwarded, never read. */
export const UNREAD_CALL: JsonRpcMessage = Object.freeze({
  kind: 'request',
  method: 'tools/call',
  params: undefined,
  rawId: undefined,
})

/**
 * A `tools/call` to a member that checks its body against its headers itself (`trustHeaders:
 * true`): judged, limited and forwarded on its `Mcp-Name` exactly as on that member's own endpoint
 * (docs/virtual-servers.md "What is judged"), without reading the body. Undefined when anything
 * needs the body (a prefix to take off, a curated name, a name not known yet, a member whose era
 * is not known or is 2025, a task to seal, trace context to add): the stage then parses it.
 * `r` is the request as the stage has it before parsing: `UNREAD_CALL`, no raw id, no text.
 */
export function trustedCall(r: VirtualRequest, mcp: McpRequestInfo): Promise<Answer> | undefined {
  const { v, call } = r
  const target = mcp.targets[0]
  if (mcp.method !== 'tools/call' || target?.kind !== 'tool' || call.trace !== undefined)
    return undefined
  const route = v.state.table('tools').routes.get(target.name)
  if (route === undefined || route.name !== target.name) return undefined
  const member = v.members[route.member] as MemberServer
  // SECURITY: only for a member whose own endpoint trusts headers: it refuses a body that names
  // another tool than Mcp-Name (spec 2026-07-28 basic/transports/streamable-http §Server
  // Validation), so what it runs is the tool its policy allowed here.
  // SECURITY: a member with a conditional rule is judged on the arguments: the body is read.
  if (
    !member.config.trustHeaders ||
    member.catalog !== undefined ||
    v.eras.of(member.name) !== 'modern' ||
    r.ctx.policy?.hasConditions(member.name) === true
  )
    return undefined
  if (mayCarryTaskIds('tools/call', undefined, call.body)) return undefined
  // A denial peeks the id of the body it never parsed.
  const unread = { ...r, rawId: peekRawId(call.body) ?? 'null' }
  return admitted(unread, member, target, target, () =>
    forwardTo(r, member, '', [target], undefined),
  )
}

/** completion/complete: a prompt by name (prefix off `ref.name`) or a resource template by URI. */
export async function complete(r: VirtualRequest): Promise<Answer> {
  const ref = r.message.params?.ref
  if (isRecord(ref) && ref.type === 'ref/prompt') return callByName(r, 'prompts', ['ref', 'name'])
  if (isRecord(ref) && ref.type === 'ref/resource' && typeof ref.uri === 'string') {
    const member = await routeUri(r, ref.uri)
    const target: McpTarget = { kind: 'resource', uri: ref.uri }
    if (member === undefined) return denied(r, target, 'virtual_unknown_name')
    return admitted(r, member, target, target, () =>
      forwardTo(r, member, r.text, [target], undefined),
    )
  }
  throw new GatewayError('invalid_params', 'params.ref must be a ref/prompt or ref/resource')
}

/** The member serving a URI or template; refused when two serve it and `resources:` does not say. */
export async function routeUri(r: VirtualRequest, uri: string): Promise<MemberServer | undefined> {
  const { v } = r
  // The URI's form is the member's admission's to judge (endpoint/admit.ts), as on its endpoint.
  let route = routeResource(uri, v.state, v.resourceRoute)
  // A URI nobody is known to serve: the lists not fresh are read again (single flight, throttled).
  if (route.kind === 'unknown') {
    await refreshKinds(r, ['resources', 'resourceTemplates'])
    route = routeResource(uri, v.state, v.resourceRoute)
  }
  if (route.kind === 'ambiguous') {
    const names = route.members.map((m) => v.memberNames[m]).join(', ')
    throw new GatewayError(
      'invalid_params',
      `${JSON.stringify(uri)} is served by ${names}; virtualServers.${v.name}.resources must route it`,
    )
  }
  return route.kind === 'member' ? v.members[route.member] : undefined
}
