import { GatewayError } from '../errors.js'
import type { JsonRpcMessage } from '../mcp/jsonrpc.js'
import { taskIdOf, type TaskIdSealer } from '../mcp/task-ids.js'
import { ownerAad, Sealer, subKey, type HandleOwner } from '../upstream/sessions.js'
import { replaceParam } from '../mcp/rewrite.js'

/** Longest task id a client may present; anything longer is refused before any crypto runs. */
const MAX_HANDLE = 1024
/** Longest member task id the gateway seals (its sealed form stays under MAX_HANDLE). */
const MAX_MEMBER_ID = 512

/**
 * Task ids handed out by a virtual server (docs/virtual-servers.md "Tasks"). A member's task id
 * says nothing about which member issued it, so the id the client gets carries the member too: the
 * member's name and its own task id, sealed with AES-256-GCM (upstream/sessions.ts `Sealer`) under
 * a sub-key of the handle key, authenticated together with the virtual server and the caller
 * (issuer and subject). A handle therefore opens only for the caller it was given to, on the
 * virtual server that gave it; it names the member in ciphertext, so it is useless on the member's
 * own endpoint and on any other virtual server. As for direct task ids (docs/balancing.md "Task
 * ids"), the nonce is derived from the input, so one task keeps one id in every answer.
 */
export class VirtualTaskCodec {
  private readonly sealer: Sealer

  constructor(
    key: Buffer,
    private readonly virtual: string,
  ) {
    this.sealer = new Sealer(
      subKey(key, 'mcp-edge virtual task ids v1'),
      subKey(key, 'mcp-edge virtual task nonces v1'),
    )
  }

  /** The id to hand `owner` for a task `member` created; undefined when the id is too long. */
  seal(member: string, taskId: string, owner: HandleOwner | undefined): string | undefined {
    if (taskId.length > MAX_MEMBER_ID) return undefined
    // Length-prefixed: the member name and the task id cannot be cut elsewhere.
    return this.sealer.seal(`${member.length}:${member}${taskId}`, this.aad(owner))
  }

  /**
   * The member and its own task id, or undefined for anything this virtual server did not give
   * `owner` (forged, altered, another caller's, another virtual server's, a member's raw id).
   */
  open(handle: string, owner: HandleOwner | undefined): MemberTask | undefined {
    if (handle.length > MAX_HANDLE) return undefined
    const plain = this.sealer.open(handle, this.aad(owner))
    if (plain === undefined) return undefined
    const colon = plain.indexOf(':')
    const length = Number(plain.slice(0, colon))
    if (colon <= 0 || !Number.isSafeInteger(length) || colon + 1 + length > plain.length)
      return undefined
    return {
      member: plain.slice(colon + 1, colon + 1 + length),
      taskId: plain.slice(colon + 1 + length),
    }
  }

  /** The sealer for the answers of one member to one caller (mcp/task-ids.ts `taskIdHook`). */
  sealerFor(member: string, owner: HandleOwner | undefined): TaskIdSealer {
    return {
      wrap: (id) => this.seal(member, id, owner),
      unwrap: (handle) => {
        const t = this.open(handle, owner)
        return t?.member === member ? t.taskId : undefined
      },
    }
  }

  private aad(owner: HandleOwner | undefined): string {
    return `virtual task\0${this.virtual}\0${ownerAad(owner)}`
  }
}

/** A task as its member knows it. */
export interface MemberTask {
  readonly member: string
  readonly taskId: string
}

/** A `tasks/get|result|cancel|update` request to a virtual server, opened for its member. */
export interface OpenedMemberTask extends MemberTask {
  /** The client's body with only `params.taskId` replaced by the member's own id. */
  readonly text: string
}

/**
 * Opens the task id of a task follow-up for its caller. Undefined when the caller was not given
 * this id (the caller then gets the answer a server gives for an unknown task, and nothing is
 * forwarded). The checks are those of the member's own endpoint (mcp/task-ids.ts
 * `openTaskRequest`); the member's id then replaces the handle in the raw body text, so every
 * other byte, the request id included, is the client's.
 */
export function openMemberTask(
  message: JsonRpcMessage,
  text: string,
  headerName: string | undefined,
  codec: VirtualTaskCodec,
  owner: HandleOwner | undefined,
): OpenedMemberTask | undefined {
  const handle = taskIdOf(message, headerName)
  const task = codec.open(handle, owner)
  if (task === undefined) return undefined
  // SECURITY: only this one value changes; a taskId named twice is refused, never guessed at.
  const rewritten = replaceParam(text, ['taskId'], task.taskId)
  if (rewritten === undefined) throw new GatewayError('invalid_params', 'ambiguous params.taskId')
  return { ...task, text: rewritten }
}
