import { NAME_PARAMS, type NameParam } from '../mcp/methods.js'
import { callByName, complete } from './handle-calls.js'
import { getSkill, readDirectory, readResource } from './handle-uris.js'
import { discover, list } from './handle-lists.js'
import { LISTS } from './lists.js'
import { taskFollowUp, taskList } from './handle-tasks.js'
import type { VirtualHandler, VirtualRequest } from './request.js'
import type { NamedKind } from './state.js'

/** The routing table (virtual/state.ts) a tool, prompt or event type name is looked up in. */
const ROUTES: Readonly<Record<Exclude<NameParam['kind'], 'resource'>, NamedKind>> = {
  tool: 'tools',
  prompt: 'prompts',
  event: 'events',
}

/** The handler of each method that names a tool, prompt or event type: routed by that name. */
const BY_NAME = [...NAME_PARAMS].flatMap(([method, { kind, field }]) => {
  if (kind === 'resource') return []
  const routes = ROUTES[kind]
  return [[method, (r: VirtualRequest) => callByName(r, routes, [field])]] as const
})

/**
 * What a virtual server answers, by method (docs/virtual-servers.md). Discovery and lists fan out
 * to every member and merge; calls, reads, gets, completions and the events extension's requests
 * (events/poll, events/stream, events/subscribe, events/unsubscribe) are routed to one member by
 * name and streamed back untouched; skills/get, reads and directory reads of URIs under a
 * member's renamed root go to that member, their answers named back (virtual/handle-uris.ts). Any other method is answered as a server that does not know it.
 * 2025-era methods (initialize, ping …) are answered by the 2025-era front and
 * subscriptions/listen by the listen stage (pipeline/virtual-legacy.ts, virtual/listen.ts).
 */
export const HANDLERS: Readonly<Record<string, VirtualHandler>> = Object.freeze(
  Object.assign(Object.create(null) as Record<string, VirtualHandler>, {
    'server/discover': discover,
    ...Object.fromEntries(Object.keys(LISTS).map((m) => [m, list])),
    ...Object.fromEntries(BY_NAME),
    'resources/read': readResource,
    'resources/directory/read': readDirectory,
    'skills/get': getSkill,
    'completion/complete': complete,
    'tasks/get': taskFollowUp,
    'tasks/result': taskFollowUp,
    'tasks/cancel': taskFollowUp,
    'tasks/update': taskFollowUp,
    'tasks/list': taskList,
  }),
)
