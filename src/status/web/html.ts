import { html as honoHtml } from 'hono/html'
import type { HtmlEscapedString } from 'hono/utils/html'

/** Markup built by html``: every interpolation in it was escaped, or was itself Html. */
export type Html = HtmlEscapedString

/**
 * What the page may interpolate: text and numbers, markup html`` built, lists of these, or
 * nothing (`null`, `undefined`, `false` are left out). No objects, no promises: hono's html treats
 * any object that says `isEscaped` as markup, so only values of these types reach it.
 */
export type Part = string | number | Html | null | undefined | false | readonly Part[]

/**
 * hono's html`` (hono/html), typed for the status page (docs/operations.md §Status page): every
 * string interpolated is escaped (`&`, `<`, `>`, `"`, `'`), so a tool named
 * `<img src=x onerror=alert(1)>` is shown as that text. SECURITY: the page puts interpolations only
 * in text and in double-quoted attributes, never in script, style, URLs or unquoted attributes,
 * where escaping these five is enough (OWASP XSS prevention, rules 1 and 2). hono's `raw` is not
 * imported anywhere under src/status/ (eslint.config.js): markup comes from html`` only.
 */
export function html(strings: TemplateStringsArray, ...values: readonly Part[]): Html {
  const out = honoHtml(strings, ...values)
  // hono returns a promise only when a value is one, which Part rules out.
  if (out instanceof Promise) throw new TypeError('html``: a promise was interpolated')
  return out
}
