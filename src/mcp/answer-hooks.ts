import { GatewayError } from '../errors.js'
import type { AnswerShape } from './answer-scan.js'
import { isRecord } from './jsonrpc.js'

/**
 * Sees the final JSON-RPC response of an upstream answer (JSON body or the response event of an
 * SSE stream) and may replace it. Returning undefined keeps the original bytes untouched.
 * Hooks run in order; each sees what the previous one returned.
 */
export type ResultHook = ((
  message: Record<string, unknown>,
  info: { readonly sse: boolean },
) => Record<string, unknown> | undefined) & {
  /**
   * Observe mode: told once when the final response will not be shown to the hook after all (too
   * large to hold, or not readable). A hook that others wait on (the cache's single flight) lets
   * them go then, not at the pace of the one client's socket the rest is relayed to.
   */
  readonly unseen?: () => void
}

/** Tells each hook that the final response will not be shown to it (ResultHook.unseen). */
export function notSeen(hooks: readonly ResultHook[]): void {
  for (const hook of hooks) hook.unseen?.()
}

/**
 * How an answer is read on its way to the client. `rewrite`: the client may only get what the
 * hooks judged (a policy filter, curation, a task-id seal), so an answer too large to inspect,
 * or one the gateway cannot read exactly as every client would, is refused (502) rather than
 * passed unjudged. `observe`: the hooks only look (cache capture); the client gets the backend's
 * bytes, and an answer too large to inspect is relayed without being observed. `pass`: no hooks;
 * the answer is only checked to be the answer to this request (mcp/answer-scan.ts).
 */
export type HookMode = 'rewrite' | 'observe' | 'pass'

export function applyHooks(
  message: Record<string, unknown>,
  hooks: readonly ResultHook[],
  sse: boolean,
): Record<string, unknown> | undefined {
  let current = message
  let changed = false
  for (const hook of hooks) {
    const next = hook(current, { sse })
    if (next !== undefined) {
      current = next
      changed = true
    }
  }
  return changed ? current : undefined
}

/** A JSON-RPC response: a result or an error, and no method (requests and notifications have one). */
function isResponse(v: unknown): v is Record<string, unknown> {
  return isRecord(v) && ('result' in v || 'error' in v) && !('method' in v)
}

/**
 * Parses an answer the hooks are to judge, refusing one that not every reader reads as this
 * gateway does: not strict JSON (`NaN`, which Python's reader takes), not a response, a key
 * written twice (readers differ on which one counts) or two keys of one object that differ only
 * by case (Go's encoding/json matches keys case-insensitively). The bytes relayed when no hook
 * changes anything are then the ones judged.
 */
export function readJudged(text: string, shape: AnswerShape): Record<string, unknown> {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    throw new GatewayError('upstream_unreadable', { cause: err })
  }
  // SECURITY: what is not a response cannot be filtered, so it is not relayed either.
  if (!isResponse(parsed)) throw new GatewayError('upstream_unreadable')
  // SECURITY: a duplicate or case-variant key would let a client read what no hook saw.
  if (members(parsed) !== shape.members) throw new GatewayError('upstream_unreadable')
  return parsed
}

/**
 * Objects this deep or shallower (the root, `result`, each listed item) may not hold two keys
 * that differ only by case; deeper, they may (a tool's input schema can have `Name` and `name`).
 */
const CASE_CHECK_DEPTH = 3

/** Members of every object in `v`, or -1 when two keys of a shallow object fold to one. */
function members(v: unknown): number {
  let count = 0
  const stack: { readonly x: unknown; readonly depth: number }[] = [{ x: v, depth: 1 }]
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const { x, depth } = top
    if (Array.isArray(x)) {
      for (const item of x)
        if (typeof item === 'object' && item !== null) stack.push({ x: item, depth })
      continue
    }
    const keys = Object.keys(x as object)
    count += keys.length
    if (depth <= CASE_CHECK_DEPTH && keys.length > 1) {
      if (new Set(keys.map((k) => k.toLowerCase())).size !== keys.length) return -1
    }
    for (const k of keys) {
      const item = (x as Record<string, unknown>)[k]
      if (typeof item === 'object' && item !== null) stack.push({ x: item, depth: depth + 1 })
    }
  }
  return count
}

/**
 * Serialises a rewritten message with the id exactly as the upstream wrote it (`rawId`, as the
 * scan read it): JSON.parse turns 12345678901234567890 into 12345678901234567000, and the client
 * must get its own id back.
 */
export function serialize(message: Record<string, unknown>, rawId: string | undefined): string {
  if (rawId === undefined) return JSON.stringify(message)
  const { id: _id, ...rest } = message
  const body = JSON.stringify(rest)
  return body === '{}' ? `{"id":${rawId}}` : `{"id":${rawId},${body.slice(1)}`
}

export function tooLarge(what: string): GatewayError {
  return new GatewayError('upstream_bad_response', {
    cause: new Error(`${what} too large to inspect`),
  })
}
