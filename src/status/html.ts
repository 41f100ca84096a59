/**
 * HTML built by the status page: every interpolated value is escaped unless it is itself Html, so
 * a tool named `<img src=x onerror=alert(1)>` is shown as that text (docs/operations.md §Status
 * page). There is no way to interpolate raw text but `Html` values this module built.
 */
export class Html {
  /** Only html`` and join() make these (the key is this module's): markup escaped where it must be. */
  constructor(
    key: symbol,
    readonly text: string,
  ) {
    if (key !== KEY) throw new TypeError('Html is made by html`` only')
  }

  toString(): string {
    return this.text
  }
}

const KEY = Symbol('html')

/** A template whose interpolations are escaped (arrays are concatenated, null/undefined/false omitted). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? ''
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '')
  return new Html(KEY, out)
}

/** Html values one after another. */
export function join(parts: readonly Html[], separator = ''): Html {
  return new Html(KEY, parts.map((p) => p.text).join(separator))
}

/**
 * SECURITY: escapes the five characters that end text or a quoted attribute value (OWASP XSS
 * prevention, rules 1 and 2): the page puts interpolations only in text and in double-quoted
 * attributes, never in script, style, URLs or unquoted attributes.
 */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c)
}

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

function render(value: unknown): string {
  if (value instanceof Html) return value.text
  if (Array.isArray(value)) return value.map(render).join('')
  if (value === undefined || value === null || value === false) return ''
  return escapeHtml(String(value))
}
