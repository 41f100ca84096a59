import { EVENT_NAME_METHODS, LIST_METHODS } from '../mcp/methods.js'
import { callByName, complete, readResource } from './handle-calls.js'
import { discover, list } from './handle-lists.js'
import { taskFollowUp, taskList } from './handle-tasks.js'
import type { VirtualHandler, VirtualRequest } from './request.js'

/**
 * What a virtual server answers, by method (docs/virtual-servers.md). Discovery and lists fan out
 * to every member and merge; calls, reads, gets, completions and the events extension's requests
 * (events/poll, events/stream, events/subscribe, events/unsubscribe) are routed to one member by
 * name and streamed back untouched. Any other method is answered as a server that does not know it.
 * 2025-era methods (initialize, ping …) are answered by the 2025-era front and
 * subscriptions/listen by the listen stage (pipeline/virtual-legacy.ts, virtual/listen.ts).
 */
export const HANDLERS: Readonly<Record<string, VirtualHandler>> = Object.freeze(
  Object.assign(Object.create(null) as Record<string, VirtualHandler>, {
    'server/discover': discover,
    ...Object.fromEntries(Object.keys(LIST_METHODS).map((m) => [m, list])),
    'tools/call': (r: VirtualRequest) => callByName(r, 'tools', ['name']),
    'prompts/get': (r: VirtualRequest) => callByName(r, 'prompts', ['name']),
    'resources/read': readResource,
    'completion/complete': complete,
    ...Object.fromEntries(
      [...EVENT_NAME_METHODS].map((m) => [
        m,
        (r: VirtualRequest) => callByName(r, 'events', ['name']),
      ]),
    ),
    'tasks/get': taskFollowUp,
    'tasks/result': taskFollowUp,
    'tasks/cancel': taskFollowUp,
    'tasks/update': taskFollowUp,
    'tasks/list': taskList,
  }),
)
