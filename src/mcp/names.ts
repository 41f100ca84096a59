/**
 * Values the gateway decides on that other readers could see differently: tool and prompt names
 * with invisible or reordering characters, and resource URIs that a backend resolves to another
 * path than the text policy matched.
 */

// SECURITY: C0 and C1 controls (NUL, DEL included), lone surrogates (which UTF-8 encoders replace
// or reject, each differently) and bidi controls (which make a log line or a consent screen show
// another name than the one that runs; Unicode TR36 §3.1). With the `u` flag a paired surrogate is
// one code point, so \p{Cs} matches only lone ones.
const FORBIDDEN_IN_NAME = /[\p{Cc}\p{Cs}\p{Bidi_Control}]/u

/** True when a tool or prompt name carries a character that is never allowed in one. */
export function hasForbiddenNameCharacter(name: string): boolean {
  return FORBIDDEN_IN_NAME.test(name)
}

// SECURITY: a `.` or `..` segment, a percent-encoded `.`, `/`, `\` or control (`%00` ends the path
// for a C backend), or a backslash: a backend
// that resolves the path (RFC 3986 §5.2.4 remove_dot_segments, a file system, a WHATWG URL parser
// that reads `\` as `/`) acts on another resource than the text a pattern matched, so
// `file:///projects/app/../../etc/passwd` would match `file:///projects/app/*`.
const NOT_NORMAL = /(?:^|[/:])\.{1,2}(?:$|[/?#])|%(?:2e|2f|5c|[01][0-9a-f]|7f)|\\/i

const CONTROL = /[\p{Cc}]/u

/** Why a resource URI is not in the normal form policy matches, or undefined when it is. */
export function uriProblem(uri: string): string | undefined {
  // SECURITY: a C reader ends the URI at NUL and a log or a consent screen hides controls, so a
  // URI with one names something else to them than the text a rule matched.
  if (CONTROL.test(uri)) return 'it contains a control character'
  const m = NOT_NORMAL.exec(uri)
  if (m === null) return undefined
  const found = m[0]
  if (found === '\\') return 'it contains a backslash'
  if (found.startsWith('%')) return `it contains the percent-encoded ${JSON.stringify(found)}`
  return 'it contains a "." or ".." path segment'
}

/** `name` with every character outside printable ASCII as a \u escape, safe for an error detail. */
export function printable(name: string): string {
  return name.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}
