import { GatewayError } from '../errors.js'
import { decodeHeaderValue, encodeHeaderValue } from './headers.js'
import { isRecord, type JsonRpcMessage } from './jsonrpc.js'
import type { ResultHook } from './result-transform.js'

/**
 * Task ids (`tasks/*`) handed out by the gateway are the backend's ids, sealed for the principal
 * whose request created the task (docs/policy.md "Tasks"). Where ids travel, per revision:
 * - 2025-11-25 (core tasks): a `tools/call` with `params.task` is answered with
 *   `result.task.taskId`; `tasks/get` and `tasks/cancel` answer a Task (`result.taskId`);
 *   `tasks/list` answers `result.tasks[].taskId`; `tasks/result` carries
 *   `result._meta["io.modelcontextprotocol/related-task"].taskId`;
 * - 2026-07-28 (extension `io.modelcontextprotocol/tasks`): a `tools/call` from a client that
 *   declares the extension in its request capabilities may be answered with a CreateTaskResult,
 *   `resultType: "task"` and `result.taskId`; `tasks/get` answers `result.taskId`; `tasks/update`
 *   and `tasks/cancel` answer an empty result; `Mcp-Name` mirrors `params.taskId`.
 */

/** Methods whose `params.taskId` names a task the caller must own. */
const TASK_ID_METHODS: ReadonlySet<string> = new Set([
  'tasks/get',
  'tasks/result',
  'tasks/cancel',
  'tasks/update',
])
const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'
const RELATED_TASK = 'io.modelcontextprotocol/related-task'
const CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities'
const EXTENSION_BYTES = Buffer.from(TASKS_EXTENSION)

/** Seals and opens task ids for one caller of one server. */
export interface TaskIdSealer {
  /** The id to hand the caller, or undefined when the backend's id is too long to seal. */
  wrap(upstreamId: string): string | undefined
  /** The backend's id, or undefined for an id this caller was never given. */
  unwrap(handle: string): string | undefined
}

/** Whether `method` is one of the `tasks/*` methods the gateway handles. */
export function isTaskMethod(method: string | undefined): boolean {
  return method !== undefined && (TASK_ID_METHODS.has(method) || method === 'tasks/list')
}

/**
 * Whether the answer to this request can carry a task id, so the answer needs the rewriting hook.
 * Plain `tools/call` answers (no task requested or negotiated) never get it: that path stays a
 * straight stream. An unparsed modern body is searched for the extension name (conservative: a
 * false positive only costs a rewrite that changes nothing).
 */
export function mayCarryTaskIds(
  method: string | undefined,
  message: JsonRpcMessage | undefined,
  body: Buffer,
): boolean {
  if (isTaskMethod(method)) return true
  if (method !== 'tools/call') return false
  if (message === undefined) return body.includes(EXTENSION_BYTES)
  const params = message.params
  if (params === undefined) return false
  if (params.task !== undefined) return true // 2025-11-25: task-augmented request
  const meta = params._meta
  const caps = isRecord(meta) ? meta[CAPABILITIES] : undefined
  const ext = isRecord(caps) ? caps.extensions : undefined
  return isRecord(ext) && ext[TASKS_EXTENSION] !== undefined
}

/** A result hook that replaces every task id the answer carries with its sealed form. */
export function taskIdHook(sealer: TaskIdSealer): ResultHook {
  return (message) => {
    const result = message.result
    if (!isRecord(result)) return undefined
    const out = { ...result }
    let changed = wrapField(out, sealer)
    if (isRecord(out.task)) {
      const task = { ...out.task }
      if (wrapField(task, sealer)) {
        out.task = task
        changed = true
      }
    }
    if (Array.isArray(out.tasks)) {
      out.tasks = out.tasks.map((t: unknown) => {
        if (!isRecord(t)) return t
        const copy = { ...t }
        if (wrapField(copy, sealer)) changed = true
        return copy
      })
    }
    if (isRecord(out._meta) && isRecord(out._meta[RELATED_TASK])) {
      const related = { ...out._meta[RELATED_TASK] }
      if (wrapField(related, sealer)) {
        out._meta = { ...out._meta, [RELATED_TASK]: related }
        changed = true
      }
    }
    return changed ? { ...message, result: out } : undefined
  }
}

function wrapField(o: Record<string, unknown>, sealer: TaskIdSealer): boolean {
  const id = o.taskId
  if (id === undefined) return false
  const sealed = typeof id === 'string' ? sealer.wrap(id) : undefined
  // SECURITY: a task id the gateway cannot seal is never relayed in the clear.
  if (sealed === undefined) {
    // The dispatch turns it into an upstream failure of this attempt (ProxyHandler).
    throw new GatewayError('upstream_bad_response', 'task id not sealable')
  }
  o.taskId = sealed
  return true
}

/** A `tasks/*` request, opened: the body and `Mcp-Name` value to forward instead. */
export interface OpenedTaskRequest {
  readonly body: Buffer
  readonly upstreamId: string
  /** `Mcp-Name` for the backend (SEP-2243 §Encoding applied). */
  readonly mcpName: string
}

/**
 * The `params.taskId` handle of a tasks/* follow-up, checked as the backend will read it: a string,
 * under that exact key, and the one `Mcp-Name` names (SEP-2243: Mcp-Name mirrors params.taskId).
 */
export function taskIdOf(message: JsonRpcMessage, headerName: string | undefined): string {
  const params = message.params
  if (params === undefined)
    throw new GatewayError('invalid_params', `${message.method} requires params.taskId`)
  for (const k of Object.keys(params)) {
    // SECURITY: a case-insensitive backend parser must not find another taskId than the one opened.
    if (k !== 'taskId' && k.toLowerCase() === 'taskid')
      throw new GatewayError('case_variant_key', k)
  }
  const handle = params.taskId
  if (typeof handle !== 'string')
    throw new GatewayError('invalid_params', `${message.method} requires params.taskId as a string`)
  if (headerName !== undefined && decodeHeaderValue(headerName) !== handle)
    throw new GatewayError('header_mismatch', 'the Mcp-Name header does not name params.taskId')
  return handle
}

/**
 * Opens the task id of a `tasks/get|result|cancel|update` request for its caller. Returns
 * undefined when the caller does not own the id (or it is not one the gateway issued): the caller
 * then gets the answer a server gives for an unknown task, and nothing is forwarded.
 */
export function openTaskRequest(
  message: JsonRpcMessage,
  body: Buffer,
  headerName: string | undefined,
  sealer: TaskIdSealer,
): OpenedTaskRequest | undefined {
  const handle = taskIdOf(message, headerName)
  const upstreamId = sealer.unwrap(handle)
  if (upstreamId === undefined) return undefined
  const parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>
  const rest: Record<string, unknown> = {
    ...parsed,
    params: { ...(parsed.params as Record<string, unknown>), taskId: upstreamId },
  }
  delete rest.id
  const json = JSON.stringify(rest)
  // The id is echoed exactly as the client wrote it (JSON.parse would round a big integer).
  const text = message.rawId === undefined ? json : `{"id":${message.rawId},${json.slice(1)}`
  return { body: Buffer.from(text), upstreamId, mcpName: encodeHeaderValue(upstreamId) }
}

/** The body of the answer a server gives for a task it does not know (in band, HTTP 200). */
export function unknownTaskAnswer(rawId: string | undefined): string {
  return `{"jsonrpc":"2.0","id":${rawId ?? 'null'},"error":{"code":-32602,"message":"Failed to retrieve task: Task not found"}}`
}

/** `tasks/list` for an authenticated caller: the backend's list is not per principal (empty). */
export function ownTasksListAnswer(rawId: string | undefined): string {
  return `{"jsonrpc":"2.0","id":${rawId ?? 'null'},"result":{"tasks":[]}}`
}

/**
 * SECURITY: task status subscriptions (`subscriptions/listen` with `notifications.taskIds`) would
 * name tasks by the backend's ids, which only their owner may use; they are refused.
 */
export function refuseTaskSubscriptions(message: JsonRpcMessage | undefined): void {
  const n = message?.params?.notifications
  if (!isRecord(n)) return
  for (const k of Object.keys(n)) {
    if (k.toLowerCase() === 'taskids') {
      throw new GatewayError(
        'invalid_params',
        'task status subscriptions are not supported through the gateway; poll tasks/get',
      )
    }
  }
}
