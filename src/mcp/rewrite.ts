/**
 * The bounded rewrite of a member request (docs/virtual-servers.md "What is judged, and what the members receive"): one
 * value inside `params` is replaced in the raw body text and every other byte stays as the client
 * sent it, the id and any integer past 2^53 included. The body already passed the strict scanner
 * (mcp/strict-json.ts), so it is one well-formed JSON object; a path that is missing or named
 * twice is refused (undefined) rather than guessed at.
 */
export function replaceParam(
  body: string,
  path: readonly string[],
  value: string,
): string | undefined {
  const span = locate(body, ['params', ...path])
  if (span === undefined) return undefined
  return body.slice(0, span[0]) + JSON.stringify(value) + body.slice(span[1])
}

/** [start, end) of the value at `path` (object keys from the top), if present exactly once. */
export function locate(text: string, path: readonly string[]): [number, number] | undefined {
  let i = 0
  let found: [number, number] | undefined
  const walk = (start: number, depth: number): number => {
    i = ws(text, start)
    const ch = text[i]
    if (ch === '{') {
      i++
      for (;;) {
        i = ws(text, i)
        if (text[i] === '}') return i + 1
        const keyStart = i
        const keyEnd = stringEnd(text, i)
        const key = JSON.parse(text.slice(keyStart, keyEnd)) as string
        i = ws(text, keyEnd)
        i++ // ':'
        const valueStart = ws(text, i)
        const onPath = depth < path.length && key === path[depth]
        const end =
          onPath && depth === path.length - 1 ? skip(valueStart) : walkIf(onPath, valueStart, depth)
        if (onPath && depth === path.length - 1) {
          if (found !== undefined) throw new Duplicate()
          found = [valueStart, end]
        }
        i = ws(text, end)
        if (text[i] === ',') i++
        else return i + 1 // '}'
      }
    }
    return skip(i)
  }
  const walkIf = (onPath: boolean, start: number, depth: number): number =>
    onPath ? walk(start, depth + 1) : skip(start)
  const skip = (start: number): number => valueEnd(text, start)
  try {
    walk(0, 0)
  } catch (err) {
    if (err instanceof Duplicate) return undefined
    throw err
  }
  return found
}

class Duplicate extends Error {}

function ws(t: string, i: number): number {
  while (i < t.length && (t[i] === ' ' || t[i] === '\t' || t[i] === '\n' || t[i] === '\r')) i++
  return i
}

/** End (exclusive) of the string token starting at `i` (a `"`). */
function stringEnd(t: string, i: number): number {
  i++
  while (i < t.length) {
    const ch = t[i]
    if (ch === '\\') i += 2
    else if (ch === '"') return i + 1
    else i++
  }
  throw new Error('unterminated string')
}

/** End (exclusive) of any JSON value starting at `i`. */
function valueEnd(t: string, i: number): number {
  i = ws(t, i)
  const ch = t[i]
  if (ch === '"') return stringEnd(t, i)
  if (ch === '{' || ch === '[') {
    let depth = 0
    while (i < t.length) {
      const c = t[i]
      if (c === '"') {
        i = stringEnd(t, i)
        continue
      }
      if (c === '{' || c === '[') depth++
      else if (c === '}' || c === ']') {
        depth--
        if (depth === 0) return i + 1
      }
      i++
    }
    throw new Error('unterminated value')
  }
  while (i < t.length && !',}] \t\n\r'.includes(t[i] as string)) i++
  return i
}
