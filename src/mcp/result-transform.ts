import type { HookMode, ResultHook } from './answer-hooks.js'
import type { ExpectedId } from './answer-scan.js'
import { bodyKind, type BodyTransform } from './body-transform.js'
import { JsonPass, JsonResult, JsonTee } from './json-answer.js'
import { SseAnswer } from './sse-answer.js'

export type { HookMode, ResultHook } from './answer-hooks.js'

/**
 * The reader of an upstream answer's body on its way to the client, for `application/json` and
 * `text/event-stream` (other content types are not touched): with no hooks it only checks that
 * the answer is the answer to this request (`expected`: its raw id, answer-scan.ts), with hooks
 * it also lets them observe or rewrite the final response (answer-hooks.ts `HookMode`).
 * `maxBytes` bounds what is held: a JSON answer read by hooks, and one SSE event.
 */
export function resultTransform(
  contentType: string | string[] | undefined,
  maxBytes: number,
  hooks: readonly ResultHook[],
  mode: HookMode,
  expected: ExpectedId,
  status: number,
): BodyTransform | undefined {
  const kind = bodyKind(contentType)
  if (kind === 'json') {
    if (mode === 'pass' || hooks.length === 0) return new JsonPass(expected, status)
    return mode === 'rewrite'
      ? new JsonResult(maxBytes, hooks, expected, status)
      : new JsonTee(maxBytes, hooks, expected, status)
  }
  if (kind === 'sse')
    return new SseAnswer(maxBytes, hooks, hooks.length === 0 ? 'pass' : mode, expected)
  return undefined
}
