import type { BodyTransform } from '../upstream/forward.js'
import { UpstreamFailure } from '../upstream/forward.js'
import { isRecord } from './jsonrpc.js'

/**
 * Sees the final JSON-RPC response of an upstream answer (JSON body or the response event of an
 * SSE stream) and may replace it. Returning undefined keeps the original bytes untouched.
 * Hooks run in order; each sees what the previous one returned.
 */
export type ResultHook = (
  message: Record<string, unknown>,
  info: { readonly sse: boolean },
) => Record<string, unknown> | undefined

/**
 * Builds a transform that applies `hooks` to the final response, for `application/json` (buffered
 * up to `maxBytes`, then parsed) and `text/event-stream` (events pass through as they arrive; only
 * the response event is parsed and possibly rewritten). Other content types are not touched.
 */
export function resultTransform(
  contentType: string,
  maxBytes: number,
  hooks: readonly ResultHook[],
): BodyTransform | undefined {
  const type = contentType.split(';')[0]?.trim().toLowerCase()
  if (type === 'application/json') return new JsonResult(maxBytes, hooks)
  if (type === 'text/event-stream') return new SseResult(maxBytes, hooks)
  return undefined
}

function applyHooks(
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

function isResponse(v: unknown): v is Record<string, unknown> {
  return isRecord(v) && 'id' in v && ('result' in v || 'error' in v)
}

class JsonResult implements BodyTransform {
  readonly streaming = false
  private readonly chunks: Buffer[] = []
  private size = 0

  constructor(
    private readonly maxBytes: number,
    private readonly hooks: readonly ResultHook[],
  ) {}

  push(chunk: Buffer): undefined {
    this.size += chunk.length
    // A bounded buffer: an answer too large to inspect is refused, never silently passed unfiltered.
    if (this.size > this.maxBytes) {
      throw new UpstreamFailure('upstream_bad_response', true, undefined, new Error('response too large to inspect'))
    }
    this.chunks.push(chunk)
  }

  end(): Buffer {
    const raw = Buffer.concat(this.chunks, this.size)
    let parsed: unknown
    try {
      parsed = JSON.parse(raw.toString('utf8'))
    } catch (err) {
      throw new UpstreamFailure('upstream_bad_response', true, undefined, err)
    }
    if (!isResponse(parsed)) return raw
    const out = applyHooks(parsed, this.hooks, false)
    return out === undefined ? raw : Buffer.from(JSON.stringify(out))
  }
}

const DOUBLE_NEWLINE = /\r\n\r\n|\n\n|\r\r/

/** SSE: whole events pass through as they complete; the response event may be rewritten. */
class SseResult implements BodyTransform {
  readonly streaming = true
  private pending = ''

  constructor(
    private readonly maxEventBytes: number,
    private readonly hooks: readonly ResultHook[],
  ) {}

  push(chunk: Buffer): Buffer | undefined {
    this.pending += chunk.toString('utf8')
    let out = ''
    for (;;) {
      const m = DOUBLE_NEWLINE.exec(this.pending)
      if (m === null) break
      const end = m.index + m[0].length
      out += this.event(this.pending.slice(0, end))
      this.pending = this.pending.slice(end)
    }
    if (this.pending.length > this.maxEventBytes) {
      throw new UpstreamFailure('upstream_bad_response', true, undefined, new Error('SSE event too large to inspect'))
    }
    return out.length > 0 ? Buffer.from(out) : undefined
  }

  end(): Buffer | undefined {
    // An unterminated trailing event was never complete; it is dropped, not forwarded half-done.
    this.pending = ''
    return undefined
  }

  /** Returns the event unchanged unless it carries the final response and a hook rewrote it. */
  private event(text: string): string {
    const data: string[] = []
    for (const line of text.split(/\r\n|\n|\r/)) {
      if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5))
    }
    if (data.length === 0) return text
    let parsed: unknown
    try {
      parsed = JSON.parse(data.join('\n'))
    } catch {
      return text
    }
    if (!isResponse(parsed)) return text
    const out = applyHooks(parsed, this.hooks, true)
    return out === undefined ? text : `event: message\ndata: ${JSON.stringify(out)}\n\n`
  }
}
