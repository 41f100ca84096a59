import { GatewayError } from '../errors.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { replaceParam } from '../mcp/rewrite.js'
import {
  ownTasksListAnswer,
  taskIdHook,
  unknownTaskAnswer,
  type TaskIdSealer,
} from '../mcp/task-ids.js'
import type { PendingPages } from './cursor.js'
import { fanOut, fanOutDeadline, type Outcome } from './fan-out.js'
import { reportPartial } from './handle-lists.js'
import {
  answer,
  inBand,
  lacksMethod,
  type Answer,
  type MemberServer,
  type VirtualRequest,
} from './request.js'
import { admitMembers } from './member-admission.js'
import { admitted, askMember, forwardTo } from './route.js'
import { openMemberTask } from './tasks.js'
import { memberEvents } from './trace.js'

const SEEN = { sse: false } as const

/**
 * `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/update`: to the member whose task it is,
 * named in the handle the virtual server gave (virtual/tasks.ts), with the member's own task id
 * in `params.taskId` and `Mcp-Name`, and the answer's ids sealed again. As on the member's own
 * endpoint, the check is ownership (docs/policy.md "Tasks"): the call that created the task was
 * judged by the member's policy; a handle this caller was not given is an unknown task, answered
 * in band, and nothing is forwarded.
 */
export async function taskFollowUp(r: VirtualRequest): Promise<Answer> {
  const { v } = r
  const task = openMemberTask(r.message, r.text, r.call.head.name, v.tasks, r.principal)
  // A member a reload took out of the virtual server no longer has tasks here.
  const index = task === undefined ? -1 : v.memberNames.indexOf(task.member)
  // SECURITY: a task id this caller was not given here is unknown; nothing is forwarded.
  if (task === undefined || index < 0)
    return inBand(r, 'task_not_found', unknownTaskAnswer(r.rawId))
  const member = v.members[index] as MemberServer
  const sealer = v.tasks.sealerFor(member.name, r.principal)
  return admitted(r, member, undefined, undefined, () =>
    forwardTo(r, member, task.text, [], task.taskId, { tasks: sealer }),
  )
}

/**
 * `tasks/list` (2025-11-25). A member's list is not per caller, so with authentication on it is
 * answered empty here, as on a member's own endpoint (docs/balancing.md "Task ids"). Without
 * authentication every caller is one principal: the members' lists are read in parallel (as a
 * list fan-out, within `fanOutTimeoutMs`) and merged, each id sealed with its member, paginated
 * with the gateway's signed cursor.
 */
export async function taskList(r: VirtualRequest): Promise<Answer> {
  // SECURITY: a member's list would hand this caller other principals' tasks.
  if (r.principal !== undefined) return inBand(r, 'tasks_list_local', ownTasksListAnswer(r.rawId))
  const { v } = r
  const cursor = r.message.params?.cursor
  let asks: PendingPages = v.members.map((_, i) => [i, ''] as const)
  if (cursor !== undefined) {
    // SECURITY: only a cursor this gateway signed for this list opens (pagination §Error Handling).
    const pending =
      typeof cursor === 'string' ? v.cursors.open(v.name, r.method, cursor) : undefined
    if (pending === undefined || pending.some(([m]) => m >= v.members.length))
      throw new GatewayError('invalid_params', 'invalid cursor')
    asks = pending
  }
  const deadline = fanOutDeadline(v.config.fanOutTimeoutMs)
  // Each member request counts against its member's limits for this caller (member-admission.ts).
  const admitted = await admitMembers(
    r,
    asks.map(([m]) => m),
    'tasks/list',
  )
  let outcomes: Outcome<Record<string, unknown>>[]
  try {
    const nobody = admitted.allRefused
    if (nobody !== undefined) throw nobody
    outcomes = await fanOut(
      asks.map((_, k) => k),
      deadline,
      (k, signal) => {
        const [m, memberCursor] = asks[k] as readonly [number, string]
        // SECURITY: a member request over the caller's limit is not sent (endpoint/limit.ts).
        const refused = admitted.refusal(m)
        if (refused !== undefined) throw refused
        const body = cursor === undefined ? r.text : replaceParam(r.text, ['cursor'], memberCursor)
        if (body === undefined) throw new GatewayError('invalid_params', 'invalid cursor')
        const member = v.members[m] as MemberServer
        return askMember(r, member, 'tasks/list', body, signal)
      },
    )
  } finally {
    admitted.release()
  }
  memberEvents(
    r.call.trace,
    r.method,
    asks.map(([m]) => v.memberNames[m] as string),
    outcomes,
  )
  const tasks: unknown[] = []
  const next: [number, string][] = []
  const missing: string[] = []
  outcomes.forEach((o, k) => {
    const [m] = asks[k] as readonly [number, string]
    const name = v.memberNames[m] as string
    if (o.ok && lacksMethod(o.value)) return
    const result = o.ok ? sealedTasks(o.value, v.tasks.sealerFor(name, undefined)) : undefined
    if (result === undefined) {
      missing.push(name)
      return
    }
    tasks.push(...result.tasks)
    if (typeof result.nextCursor === 'string') next.push([m, result.nextCursor])
  })
  const partial = reportPartial(r, r.method, missing, outcomes)
  const result: Record<string, unknown> = {
    tasks,
    ...(next.length === 0 ? {} : { nextCursor: v.cursors.seal(v.name, r.method, next) }),
  }
  return answer(r, result, partial ? 'virtual_partial' : 'ok')
}

/**
 * A member's `tasks/list` result with every id sealed; undefined for an answer that is not one,
 * or one with an id too long to seal (that member is then left out, never relayed in the clear).
 */
function sealedTasks(
  message: Record<string, unknown>,
  sealer: TaskIdSealer,
): { readonly tasks: unknown[]; readonly nextCursor?: unknown } | undefined {
  if (!isRecord(message.result) || !Array.isArray(message.result.tasks)) return undefined
  try {
    const sealed = taskIdHook(sealer)(message, SEEN)?.result ?? message.result
    return isRecord(sealed) && Array.isArray(sealed.tasks)
      ? { tasks: sealed.tasks as unknown[], nextCursor: sealed.nextCursor }
      : undefined
  } catch {
    return undefined
  }
}
