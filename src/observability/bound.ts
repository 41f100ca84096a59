/**
 * The one bound on a client-derived value that leaves the process: access-log and audit lines,
 * span names and attributes (and the tracer's span limits, telemetry/tracing.ts), metric labels.
 * In UTF-16 code units, as JavaScript and the OpenTelemetry SDK count a string's length. A header
 * may hold 16 KiB and a name or URI in a body up to the body cap (docs/security.md "What the
 * gateway owns on the way out").
 */
export const MAX_EXPORTED_CHARS = 512

const ELLIPSIS = '…'

/**
 * `value` when it fits {@link MAX_EXPORTED_CHARS}, else its start ending in `…`, at most that
 * long. A cut value is copied into a string of its own: a V8 substring keeps its whole parent
 * alive, and a span holds its attributes until it is exported, so a slice of a 900 KB name would
 * cost the 900 KB. A surrogate pair is never split (no lone surrogate reaches a JSON reader).
 */
export function bounded(value: string): string {
  if (value.length <= MAX_EXPORTED_CHARS) return value
  let end = MAX_EXPORTED_CHARS - ELLIPSIS.length
  const last = value.charCodeAt(end - 1)
  if (last >= 0xd800 && last <= 0xdbff) end-- // a high surrogate: its pair would be cut
  // SECURITY: a copy, not a slice of the client's string (see above).
  return Buffer.from(value.slice(0, end) + ELLIPSIS, 'utf16le').toString('utf16le')
}
