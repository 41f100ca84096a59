import { encodeHeaderValue } from './headers.js'
import { isRecord } from './jsonrpc.js'

/**
 * SEP-2243 parameter headers (spec 2026-07-28 basic/transports/streamable-http §Custom Headers):
 * a tool's `inputSchema` property that carries `"x-mcp-header": "Region"` makes a 2026-07-28
 * client mirror that argument into `Mcp-Param-Region` on `tools/call`, and the server refuses a
 * call whose header is missing or disagrees with the body (400, -32020). A 2025-era client cannot
 * know them; the gateway derives them for it (docs/virtual-servers.md "Parameter headers").
 */

/** One declared parameter header: where its argument is, and the name as the schema spells it. */
export interface ParamDeclaration {
  /** The argument's path below `arguments`: a chain of `properties` keys. */
  readonly path: readonly string[]
  /** The header name after `Mcp-Param-`, in the declared case (header names are not folded). */
  readonly header: string
}

export const PARAM_HEADER_PREFIX = 'mcp-param-'

/** RFC 9110 §5.1 token: what a header name may be (no space, no delimiter, no CR or LF). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
/** The property types the spec allows a declaration on (`number` is not one of them). */
const TYPES: ReadonlySet<string> = new Set(['string', 'integer', 'boolean'])
/** How deep a chain of `properties` is followed, and how many headers one tool may get. */
const MAX_DEPTH = 8
const MAX_DECLARATIONS = 32

const NONE: readonly ParamDeclaration[] = Object.freeze([])

/**
 * The valid parameter-header declarations of a tool's `inputSchema`, following `properties` only
 * (the spec's "statically reachable" rule: a declaration anywhere else is never one). A
 * declaration whose name is no header token or whose property is not a string, integer or
 * boolean is left out, and so are both of two names equal but for case: a client drops such a
 * tool, and a header derived from it would be the gateway's guess.
 */
export function paramDeclarations(inputSchema: unknown): readonly ParamDeclaration[] {
  const found: ParamDeclaration[] = []
  visit(inputSchema, [], found)
  if (found.length === 0) return NONE
  const count = new Map<string, number>()
  for (const d of found)
    count.set(d.header.toLowerCase(), (count.get(d.header.toLowerCase()) ?? 0) + 1)
  const valid = found.filter((d) => count.get(d.header.toLowerCase()) === 1)
  return valid.length === 0 ? NONE : valid.slice(0, MAX_DECLARATIONS)
}

function visit(schema: unknown, path: readonly string[], out: ParamDeclaration[]): void {
  if (!isRecord(schema) || out.length > MAX_DECLARATIONS) return
  const header = schema['x-mcp-header']
  if (path.length > 0 && header !== undefined) {
    const type = schema.type
    if (
      typeof header === 'string' &&
      TOKEN.test(header) &&
      typeof type === 'string' &&
      TYPES.has(type)
    )
      out.push({ path, header })
  }
  const properties = schema.properties
  if (!isRecord(properties) || path.length >= MAX_DEPTH) return
  for (const key of Object.keys(properties)) visit(properties[key], [...path, key], out)
}

/**
 * The `Mcp-Param-*` headers of one call, [name, value, …]: each declared argument that is a
 * string, a boolean or a safe integer, as a 2026-07-28 client writes it (booleans `true` /
 * `false`, integers in decimal, values that are not plain printable ASCII in the `=?base64?…?=`
 * form of mcp/headers.ts). An argument that is absent or null gets no header, and the server then
 * expects none (spec 2026-07-28 basic/transports/streamable-http §Server Validation); one of any
 * other type gets none either, and the server answers as it answers any client that sends none.
 */
export function paramHeaders(declarations: readonly ParamDeclaration[], args: unknown): string[] {
  const out: string[] = []
  for (const d of declarations) {
    let value: unknown = args
    for (const key of d.path)
      value = isRecord(value) && Object.hasOwn(value, key) ? value[key] : undefined
    const text =
      typeof value === 'string'
        ? value
        : typeof value === 'boolean' || Number.isSafeInteger(value)
          ? String(value)
          : undefined
    // SECURITY: the value is the argument the backend runs with, encoded so that no byte of it
    // can end the header or start another (SEP-2243 §Encoding); the name is a checked token.
    if (text !== undefined) out.push(`Mcp-Param-${d.header}`, encodeHeaderValue(text))
  }
  return out
}
