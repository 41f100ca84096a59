import { isRecord, type JsonRpcMessage } from '../mcp/jsonrpc.js'
import { locate } from '../mcp/rewrite.js'

/** The W3C trace context of the gateway's span, as the propagator writes it. */
export interface TraceFields {
  readonly traceparent: string
  /** Undefined when the span's context has none: a client `_meta.tracestate` is then removed. */
  readonly tracestate: string | undefined
}

/**
 * The request body with `params._meta.traceparent` (and `tracestate`) naming the gateway's span,
 * how MCP carries trace context (spec 2026-07-28 basic/index §_meta; OpenTelemetry MCP semantic
 * conventions §Context propagation), so a backend that reads `_meta` parents its span on the
 * gateway's as one that reads the W3C header does (docs/operations.md "Context: in and out").
 *
 * SECURITY: a bounded splice of the raw text, never a re-serialisation: the value of an existing
 * key is replaced, a missing key is inserted as the first member of `_meta` (a missing `_meta` as
 * the first member of `params`, a missing `params` as the first member of the message), and every
 * other byte stays the client's, id and arguments included (docs/security.md "Trace context in
 * the body"). Only requests are touched. `params` is the parsed message's, and the text
 * must agree with it: a body that passed the strict reader (mcp/strict-json.ts) has `params` and
 * `_meta` at most once and under no case variant, so there is one place to write. Any doubt (a
 * `params` or `_meta` that is not an object, a key the text has twice or the parse did not see)
 * gives undefined, and the body then travels as judged.
 */
export function spliceTraceContext(
  text: string,
  params: Readonly<Record<string, unknown>> | undefined,
  fields: TraceFields,
): string | undefined {
  try {
    return splice(text, params, fields)
  } catch {
    return undefined // a text the scanner does not walk: left as judged
  }
}

function splice(
  text: string,
  params: Readonly<Record<string, unknown>> | undefined,
  fields: TraceFields,
): string | undefined {
  const entries = membersText(fields)
  if (params === undefined) {
    // SECURITY: a `params` the parse did not take for an object is never doubled up.
    if (locate(text, ['params']) !== undefined) return undefined
    const open = ws(text, 0)
    if (text[open] !== '{') return undefined
    return insertAt(text, open + 1, `"params":{"_meta":{${entries}}}`, true)
  }
  const span = locate(text, ['params'])
  if (span === undefined || text[span[0]] !== '{') return undefined
  const meta = params['_meta']
  if (meta === undefined) {
    if (locate(text, ['params', '_meta']) !== undefined) return undefined
    return insertAt(text, span[0] + 1, `"_meta":{${entries}}`, !closes(text, span[0] + 1))
  }
  // A `_meta` that is not an object (null, a string) is the client's to send as it is.
  if (!isRecord(meta)) return undefined
  let out: string | undefined = setMember(text, meta, 'traceparent', fields.traceparent)
  if (out === undefined) return undefined
  out =
    fields.tracestate === undefined
      ? removeMember(out, meta, 'tracestate')
      : setMember(out, meta, 'tracestate', fields.tracestate)
  return out
}

/** `"traceparent":"…"` and, when there is one, `,"tracestate":"…"`. */
function membersText(fields: TraceFields): string {
  const parent = `"traceparent":${JSON.stringify(fields.traceparent)}`
  return fields.tracestate === undefined
    ? parent
    : `${parent},"tracestate":${JSON.stringify(fields.tracestate)}`
}

/** `params._meta[key]` set to `value`: replaced where it is, else inserted first in `_meta`. */
function setMember(
  text: string,
  meta: Readonly<Record<string, unknown>>,
  key: string,
  value: string,
): string | undefined {
  const found = locate(text, ['params', '_meta', key])
  const json = JSON.stringify(value)
  if (found !== undefined) return text.slice(0, found[0]) + json + text.slice(found[1])
  // SECURITY: present in the parse but not found once in the text: named twice; left alone.
  if (Object.hasOwn(meta, key)) return undefined
  const open = locate(text, ['params', '_meta'])
  if (open === undefined || text[open[0]] !== '{') return undefined
  return insertAt(text, open[0] + 1, `${JSON.stringify(key)}:${json}`, !closes(text, open[0] + 1))
}

/**
 * `params._meta` without `key` (with the comma that joined it to a neighbour). W3C Trace Context
 * §3.3: a `tracestate` belongs to the `traceparent` it came with; once that one is replaced by a
 * context that has none, the client's would describe another trace.
 */
function removeMember(
  text: string,
  meta: Readonly<Record<string, unknown>>,
  key: string,
): string | undefined {
  if (!Object.hasOwn(meta, key)) return text
  const value = locate(text, ['params', '_meta', key])
  if (value === undefined) return undefined
  const start = keyStart(text, value[0])
  if (start === undefined) return undefined
  const after = ws(text, value[1])
  if (text[after] === ',') return text.slice(0, start) + text.slice(ws(text, after + 1))
  // The last member: the comma before it goes with it (none when it is the only one).
  const before = wsBack(text, start - 1)
  if (text[before] === ',') return text.slice(0, before) + text.slice(value[1])
  return text.slice(0, start) + text.slice(value[1])
}

/**
 * Where the key of the member whose value starts at `valueStart` begins: back over `:` and the
 * key string to its opening quote (the first `"` not escaped by an odd run of backslashes).
 */
function keyStart(text: string, valueStart: number): number | undefined {
  let i = wsBack(text, valueStart - 1)
  if (text[i] !== ':') return undefined
  i = wsBack(text, i - 1)
  if (text[i] !== '"') return undefined
  for (let j = i - 1; j >= 0; j--) {
    if (text[j] !== '"') continue
    let slashes = 0
    while (text[j - 1 - slashes] === '\\') slashes++
    if (slashes % 2 === 0) return j
  }
  return undefined
}

/** `member` inserted at `at` (just after an object's `{`), with a comma when others follow. */
function insertAt(text: string, at: number, member: string, comma: boolean): string {
  return `${text.slice(0, at)}${member}${comma ? ',' : ''}${text.slice(at)}`
}

/** True when the object whose members start at `at` has none (`}` is next). */
function closes(text: string, at: number): boolean {
  return text[ws(text, at)] === '}'
}

function ws(t: string, i: number): number {
  while (i < t.length && isWs(t[i])) i++
  return i
}

function wsBack(t: string, i: number): number {
  while (i >= 0 && isWs(t[i])) i--
  return i
}

function isWs(ch: string | undefined): boolean {
  return ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r'
}

/**
 * The body to forward for `message` with the gateway's trace context (`propagation`, as
 * RequestTrace.propagation() gives it) in `params._meta`, or `body` itself when the message is no
 * request (notifications and responses pass untouched) or the splice declines.
 */
export function bodyWithTraceContext(
  body: Buffer,
  message: JsonRpcMessage | undefined,
  propagation: Readonly<Record<string, string>>,
): Buffer {
  const traceparent = propagation['traceparent']
  if (message?.kind !== 'request' || traceparent === undefined) return body
  const out = spliceTraceContext(body.toString('utf8'), message.params, {
    traceparent,
    tracestate: propagation['tracestate'],
  })
  return out === undefined ? body : Buffer.from(out, 'utf8')
}

/**
 * `headers` ([name, value, …]) with every `traceparent` / `tracestate` (the client's, a configured
 * one) replaced by the gateway's (W3C Trace Context §3.2, §3.3: one of each, naming this span),
 * and, when the propagation has one (`telemetry.propagateBaggage`), `baggage` likewise (W3C
 * Baggage §3). A client's `baggage` never gets this far (mcp/owned-headers.ts).
 */
export function setTraceHeaders(
  headers: string[],
  propagation: Readonly<Record<string, string>>,
): void {
  const baggage = propagation['baggage'] !== undefined
  for (let i = headers.length - 2; i >= 0; i -= 2) {
    const name = (headers[i] as string).toLowerCase()
    if (name === 'traceparent' || name === 'tracestate' || (baggage && name === 'baggage'))
      headers.splice(i, 2)
  }
  for (const [k, v] of Object.entries(propagation)) headers.push(k, v)
}
