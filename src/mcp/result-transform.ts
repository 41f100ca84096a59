import type { BodyTransform } from '../upstream/forward.js'
import { UpstreamFailure } from '../upstream/forward.js'
import { isRecord } from './jsonrpc.js'
import { findTopLevelId } from './raw-id.js'

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
 * How the hooks use the answer. `rewrite`: the client may only get what the hooks return (a policy
 * filter), so an answer too large to inspect is refused (502) rather than passed unfiltered.
 * `observe`: the hooks only look (cache capture); the answer streams through untouched as it
 * arrives, and one too large to inspect is simply not observed.
 */
export type HookMode = 'rewrite' | 'observe'

/**
 * Builds a transform that applies `hooks` to the final response, for `application/json` and
 * `text/event-stream` (events pass through as they arrive; only the response event is parsed and
 * possibly rewritten). Other content types are not touched.
 */
export function resultTransform(
  contentType: string,
  maxBytes: number,
  hooks: readonly ResultHook[],
  mode: HookMode = 'rewrite',
): BodyTransform | undefined {
  const type = contentType.split(';')[0]?.trim().toLowerCase()
  if (type === 'application/json') {
    return mode === 'rewrite' ? new JsonResult(maxBytes, hooks) : new JsonTee(maxBytes, hooks)
  }
  if (type === 'text/event-stream') return new SseResult(maxBytes, hooks, mode)
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

/**
 * Serialises a rewritten message with the id exactly as the upstream wrote it: JSON.parse turns
 * 12345678901234567890 into 12345678901234567000, and the client must get its own id back.
 */
function serialize(message: Record<string, unknown>, originalText: string): string {
  const rawId = findTopLevelId(originalText)
  if (rawId === undefined) return JSON.stringify(message)
  const { id: _id, ...rest } = message
  const body = JSON.stringify(rest)
  return body === '{}' ? `{"id":${rawId}}` : `{"id":${rawId},${body.slice(1)}`
}

/** Parses a complete JSON body and applies the hooks; undefined when nothing changed. */
function rewriteJson(text: string, hooks: readonly ResultHook[], sse: boolean): string | undefined {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    if (sse) return undefined
    throw new UpstreamFailure('upstream_bad_response', true, undefined, err)
  }
  if (!isResponse(parsed)) return undefined
  const out = applyHooks(parsed, hooks, sse)
  return out === undefined ? undefined : serialize(out, text)
}

/** Rewrite mode: the whole body is held (bounded), then parsed and possibly replaced. */
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
    const out = rewriteJson(raw.toString('utf8'), this.hooks, false)
    return out === undefined ? raw : Buffer.from(out)
  }
}

/** Observe mode: chunks go to the client as they come; a copy (bounded) is parsed at the end. */
class JsonTee implements BodyTransform {
  readonly streaming = true
  private chunks: Buffer[] | undefined = []
  private size = 0

  constructor(
    private readonly maxBytes: number,
    private readonly hooks: readonly ResultHook[],
  ) {}

  push(chunk: Buffer): Buffer {
    if (this.chunks !== undefined) {
      this.size += chunk.length
      if (this.size > this.maxBytes) this.chunks = undefined // too large to look at: just relay
      else this.chunks.push(chunk)
    }
    return chunk
  }

  end(): undefined {
    if (this.chunks === undefined) return undefined
    try {
      const parsed: unknown = JSON.parse(Buffer.concat(this.chunks, this.size).toString('utf8'))
      if (isResponse(parsed)) applyHooks(parsed, this.hooks, false)
    } catch {
      // Not JSON: nothing to observe; the client already has the bytes the backend sent.
    }
    return undefined
  }
}

const DOUBLE_NEWLINE = /\r\n\r\n|\n\n|\r\r/

/** SSE: whole events pass through as they complete; the response event may be rewritten. */
class SseResult implements BodyTransform {
  readonly streaming = true
  private pending = ''
  /** Observe mode gave up on an oversized event: the rest of the stream is relayed as is. */
  private relaying = false

  constructor(
    private readonly maxEventBytes: number,
    private readonly hooks: readonly ResultHook[],
    private readonly mode: HookMode,
  ) {}

  push(chunk: Buffer): Buffer | undefined {
    if (this.relaying) return chunk
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
      if (this.mode === 'rewrite') {
        throw new UpstreamFailure('upstream_bad_response', true, undefined, new Error('SSE event too large to inspect'))
      }
      out += this.pending
      this.pending = ''
      this.relaying = true
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
    const out = rewriteJson(data.join('\n'), this.hooks, true)
    return out === undefined || this.mode === 'observe' ? text : `event: message\ndata: ${out}\n\n`
  }
}
