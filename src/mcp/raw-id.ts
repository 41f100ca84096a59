/** An id an answer may echo: MCP ids are strings or integers (basic/index.mdx §Requests). */
const INTEGER_ID = /^-?(?:0|[1-9][0-9]*)$/

/**
 * Raw text of the top-level `id` of a body that may be invalid in other ways (duplicate keys
 * elsewhere, too deep, trailing garbage), so an error reply can still carry the request's id
 * (JSON-RPC 2.0 §5: null only when it cannot be read). Iterative, so no nesting can exhaust the
 * stack. Undefined when the root is not an object, the id is not a string or an integer (`1.5`,
 * `-0`, `null` are echoed as null), or `id` appears twice (then no id is trustworthy).
 */
export function findTopLevelId(t: string): string | undefined {
  let i = skipSpace(t, 0)
  if (t.charCodeAt(i) !== 0x7b) return undefined
  i++
  let id: string | undefined
  let seen = false
  for (;;) {
    i = skipSpace(t, i)
    if (t.charCodeAt(i) !== 0x22) return id
    const keyEnd = skipString(t, i)
    if (keyEnd < 0) return id
    const key = t.slice(i + 1, keyEnd - 1)
    i = skipSpace(t, keyEnd)
    if (t.charCodeAt(i) !== 0x3a) return id
    i = skipSpace(t, i + 1)
    const end = skipValue(t, i)
    if (end < 0) return id
    if (key === 'id') {
      if (seen) return undefined
      seen = true
      const raw = t.slice(i, end)
      id =
        raw.charCodeAt(0) === 0x22
          ? isJsonString(raw)
            ? raw
            : undefined
          : INTEGER_ID.test(raw) && raw !== '-0'
            ? raw
            : undefined
    }
    i = skipSpace(t, end)
    if (t.charCodeAt(i) !== 0x2c) return id
    i++
  }
}

/** Only a well-formed string literal may be echoed into a reply (this path is for bad bodies). */
function isJsonString(raw: string): boolean {
  try {
    return typeof JSON.parse(raw) === 'string'
  } catch {
    return false
  }
}

function skipSpace(t: string, i: number): number {
  while (
    i < t.length &&
    (t.charCodeAt(i) === 0x20 ||
      t.charCodeAt(i) === 0x0a ||
      t.charCodeAt(i) === 0x0d ||
      t.charCodeAt(i) === 0x09)
  )
    i++
  return i
}

/** Index just past the string starting at `i`, or -1. */
function skipString(t: string, i: number): number {
  for (let j = i + 1; j < t.length; j++) {
    const c = t.charCodeAt(j)
    if (c === 0x5c) j++
    else if (c === 0x22) return j + 1
  }
  return -1
}

/** Index just past the value starting at `i` (loosely: brackets balanced, strings skipped), or -1. */
function skipValue(t: string, i: number): number {
  const c = t.charCodeAt(i)
  if (c === 0x22) return skipString(t, i)
  if (c !== 0x7b && c !== 0x5b) {
    let j = i
    while (j < t.length && !',}] \n\r\t'.includes(t.charAt(j))) j++
    return j > i ? j : -1
  }
  let depth = 0
  for (let j = i; j < t.length; j++) {
    const d = t.charCodeAt(j)
    if (d === 0x22) {
      j = skipString(t, j) - 1
      if (j < 0) return -1
    } else if (d === 0x7b || d === 0x5b) depth++
    else if (d === 0x7d || d === 0x5d) {
      depth--
      if (depth === 0) return j + 1
    }
  }
  return -1
}
