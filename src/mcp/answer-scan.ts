/**
 * Reads what a JSON-RPC answer is, as its bytes stream past, without building objects: whether
 * the body is one JSON object and nothing else, which of the protocol keys it has at the top
 * level, and the raw text of its `id`. Bytes inside strings are crossed with `indexOf` (native),
 * everything else byte by byte; nesting below the top level is only counted. It does not
 * validate scalars (a `NaN` passes): a reader that must change the answer parses it as well
 * (mcp/result-transform.ts); this scan is what every answer gets, so a client is never handed
 * another request's answer or a body that is no answer at all (JSON-RPC 2.0 §5: the response id
 * MUST be the same as the request's).
 */
import type { ErrorCode } from '../errors.js'
import { sameId } from './same-id.js'

const QUOTE = 0x22
const BACKSLASH = 0x5c

const enum S {
  /** Before the root value. */
  Before,
  /** After `{` or `,` at the top level: a key (or, right after `{`, the end). */
  Key,
  /** Inside a top-level key. */
  InKey,
  /** After a top-level key: `:`. */
  Colon,
  /** After `:`: the start of a top-level value. */
  Value,
  /** Inside a top-level string value. */
  InString,
  /** Inside a top-level object or array value (depth counted, strings crossed). */
  Nested,
  /** Inside a top-level scalar (number, true, false, null). */
  Scalar,
  /** After a top-level value: `,` or `}`. */
  After,
  /** After the root object: only white space may follow. */
  Done,
  /** Not one JSON object. */
  Bad,
}

/** A top-level key the answer's reading depends on. */
const enum K {
  Other,
  Id,
  Result,
  Error,
  Method,
}

/** What the scan found. */
export interface AnswerShape {
  /** One JSON object and nothing after it, every top-level key written without escapes. */
  readonly object: boolean
  /** Has a top-level `result` or `error` (whatever else it has: some clients test these first). */
  readonly response: boolean
  readonly error: boolean
  /** A top-level key was written with an escape (`"\u0069d"`): readers differ on such keys. */
  readonly escapedKey: boolean
  /**
   * Object members written, at every depth (one `:` outside strings each): more than a parser
   * kept means a key was written twice, and readers differ on which one counts.
   */
  readonly members: number
  /** Raw text of the top-level `id`; undefined when absent or written twice. */
  readonly rawId: string | undefined
}

/** Longest id kept: past it no request's id can match (an escaped character is at most 6 bytes). */
const MAX_ID_BYTES = 4096

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09
}

/** The incremental scan: `push` each chunk as it arrives, then `end`. */
export class AnswerScan {
  private state = S.Before
  /** Nesting depth inside a top-level object or array value. */
  private depth = 0
  /** Inside a string below the top level. */
  private inString = false
  /** The last byte of the previous chunk was a backslash inside a string. */
  private escaped = false
  /** The top-level key being read (first bytes only: the keys that matter are short). */
  private key = ''
  private keyEscaped = false
  /** A `,` came last at the top level: `}` may not follow. */
  private afterComma = false
  /** stringEnd crossed an escape. */
  private backslash = false
  /** The chunk the next-backslash position is for, and that position (-1: none after it). */
  private bsChunk: Buffer | undefined
  private bsPos = -1
  private current = K.Other
  private ids = 0
  private members = 0
  private response = false
  private error = false
  private idParts: Buffer[] | undefined
  private idBytes = 0

  push(b: Buffer): void {
    let i = 0
    const n = b.length
    while (i < n) {
      switch (this.state) {
        case S.Before: {
          const c = b[i++] as number
          if (c === 0x7b) this.state = S.Key
          else if (!isSpace(c)) this.state = S.Bad
          break
        }
        case S.Key: {
          const c = b[i++] as number
          if (c === QUOTE) {
            this.state = S.InKey
            this.key = ''
          } else if (c === 0x7d && !this.afterComma) this.state = S.Done
          else if (!isSpace(c)) this.state = S.Bad
          break
        }
        case S.InKey: {
          const from = i
          this.backslash = false
          const end = this.stringEnd(b, i)
          // SECURITY: `"\u0069d"` is `id` to every reader; an escaped top-level key is no answer.
          if (this.backslash) this.keyEscaped = true
          const to = end === -1 ? n : end - 1
          if (this.key.length < 8 && to > from)
            this.key += b.toString('latin1', from, Math.min(to, from + 8 - this.key.length))
          if (end === -1) {
            i = n
            break
          }
          i = end
          this.current = keyOf(this.key)
          this.state = S.Colon
          break
        }
        case S.Colon: {
          const c = b[i++] as number
          if (c === 0x3a) {
            this.state = S.Value
            this.members++
          } else if (!isSpace(c)) this.state = S.Bad
          break
        }
        case S.Value: {
          const c = b[i] as number
          if (isSpace(c)) {
            i++
            break
          }
          this.afterComma = false
          this.startValue()
          if (c === QUOTE) {
            this.state = S.InString
            this.keepId(b, i, i + 1)
            i++
          } else if (c === 0x7b || c === 0x5b) {
            this.state = S.Nested
            this.depth = 1
            this.keepId(b, i, i + 1)
            i++
          } else if (c === 0x2c || c === 0x7d) this.state = S.Bad
          else this.state = S.Scalar
          break
        }
        case S.InString: {
          const end = this.stringEnd(b, i)
          this.keepId(b, i, end === -1 ? n : end)
          if (end === -1) i = n
          else {
            i = end
            this.state = S.After
          }
          break
        }
        case S.Nested: {
          const start = i
          i = this.nested(b, i)
          this.keepId(b, start, i)
          if (this.depth === 0) this.state = S.After
          break
        }
        case S.Scalar: {
          const start = i
          while (i < n) {
            const c = b[i] as number
            if (c === 0x2c || c === 0x7d || isSpace(c)) break
            i++
          }
          this.keepId(b, start, i)
          if (i < n) this.state = S.After
          break
        }
        case S.After: {
          const c = b[i++] as number
          if (c === 0x2c) {
            this.state = S.Key
            this.afterComma = true
          } else if (c === 0x7d) this.state = S.Done
          else if (!isSpace(c)) this.state = S.Bad
          if (this.state !== S.After) this.endValue()
          break
        }
        case S.Done: {
          if (!isSpace(b[i++] as number)) this.state = S.Bad
          break
        }
        case S.Bad:
          return
      }
    }
  }

  /** What the answer was; a body cut short is not an object. */
  end(): AnswerShape {
    const object = this.state === S.Done && !this.keyEscaped
    return {
      object,
      response: this.response,
      error: this.error,
      escapedKey: this.keyEscaped,
      members: this.members,
      rawId: this.ids === 1 && this.idParts !== undefined ? idText(this.idParts) : undefined,
    }
  }

  private startValue(): void {
    const k = this.current
    if (k === K.Id) {
      this.ids++
      this.idParts = this.ids === 1 ? [] : undefined
      this.idBytes = 0
    } else if (k === K.Result) this.response = true
    else if (k === K.Error) {
      this.response = true
      this.error = true
    }
  }

  private endValue(): void {
    this.current = K.Other
  }

  private keepId(b: Buffer, from: number, to: number): void {
    if (this.current !== K.Id || this.idParts === undefined || to <= from) return
    this.idBytes += to - from
    if (this.idBytes > MAX_ID_BYTES) this.idParts = undefined
    else this.idParts.push(b.subarray(from, to))
  }

  /** Index just past the closing quote of the string `i` is inside, or -1 at the chunk's end. */
  private stringEnd(b: Buffer, i: number): number {
    const n = b.length
    if (this.escaped) {
      this.escaped = false
      this.backslash = true
      i++
    }
    while (i < n) {
      const q = b.indexOf(QUOTE, i)
      const bs = this.nextBackslash(b, i)
      if (bs !== -1 && (q === -1 || bs < q)) {
        this.backslash = true
        if (bs + 1 >= n) {
          this.escaped = true
          return -1
        }
        i = bs + 2
        continue
      }
      return q === -1 ? -1 : q + 1
    }
    return -1
  }

  /**
   * The first backslash at or after `i`, remembered per chunk: looking it up afresh for every
   * string would scan the rest of the chunk each time.
   */
  private nextBackslash(b: Buffer, i: number): number {
    if (b !== this.bsChunk) {
      this.bsChunk = b
      this.bsPos = b.indexOf(BACKSLASH, i)
    } else if (this.bsPos !== -1 && this.bsPos < i) this.bsPos = b.indexOf(BACKSLASH, i)
    return this.bsPos
  }

  /** Crosses a nested value from `i`; returns where it stopped (its end or the chunk's). */
  private nested(b: Buffer, i: number): number {
    const n = b.length
    while (i < n) {
      if (this.inString || this.escaped) {
        const end = this.stringEnd(b, i)
        if (end === -1) return n
        this.inString = false
        i = end
        continue
      }
      const c = b[i++] as number
      if (c === QUOTE) this.inString = true
      else if (c === 0x3a) this.members++
      else if (c === 0x7b || c === 0x5b) this.depth++
      else if (c === 0x7d || c === 0x5d) {
        if (--this.depth === 0) return i
      }
    }
    return n
  }
}

function keyOf(key: string): K {
  switch (key) {
    case 'id':
      return K.Id
    case 'result':
      return K.Result
    case 'error':
      return K.Error
    case 'method':
      return K.Method
    default:
      return K.Other
  }
}

function idText(parts: readonly Buffer[]): string {
  return parts.length === 1
    ? (parts[0] as Buffer).toString('utf8')
    : Buffer.concat(parts).toString('utf8')
}

/** Scans one complete text (an SSE event's data). */
export function scanAnswerText(text: string): AnswerShape {
  const scan = new AnswerScan()
  scan.push(Buffer.from(text, 'utf8'))
  return scan.end()
}

/**
 * What a request expects of its answer's id: its raw id; null when it has none (a notification
 * or a response, which no answer may answer); undefined when no answer is tied to a request (a
 * 2025-era GET stream, which may replay earlier answers on resumption).
 */
export type ExpectedId = string | null | undefined

/**
 * Why a whole JSON body cannot go to the client as the answer to its request, or undefined. A
 * 2xx must be one JSON-RPC response with the request's id; any status may carry an error with
 * id null (a backend that could not read the request says so); no status may carry another
 * request's id, or a top-level key other readers may take for a protocol key.
 */
export function answerProblem(
  shape: AnswerShape,
  expected: ExpectedId,
  status: number,
): ErrorCode | undefined {
  if (expected === undefined) return undefined
  // SECURITY: readers differ on an escaped key, so what the id is cannot be known here.
  if (shape.escapedKey) return 'upstream_unreadable'
  if (!shape.object || !shape.response)
    return status < 300 && expected !== null ? 'upstream_unreadable' : undefined
  return idProblem(shape, expected)
}

/**
 * Why one message of an SSE stream cannot go to the client, or undefined: a response with
 * another request's id ends the answer, as does data that starts as JSON and is not one object.
 */
export function eventProblem(shape: AnswerShape, expected: ExpectedId): ErrorCode | undefined {
  if (!shape.object) return 'upstream_unreadable'
  if (!shape.response || expected === undefined) return undefined
  return idProblem(shape, expected)
}

function idProblem(shape: AnswerShape, expected: string | null): ErrorCode | undefined {
  if (shape.error && shape.rawId === 'null') return undefined
  // SECURITY: JSON-RPC 2.0 §5; a client takes an answer by its id, so another id answers
  // another of its requests (a desynchronised connection).
  if (expected === null || !sameId(expected, shape.rawId)) return 'upstream_id_mismatch'
  return undefined
}

/**
 * The raw id written in a request body the gateway forwards without parsing it, read the way
 * an answer's is (so large bodies are crossed, not decoded); undefined when none can be read.
 */
export function requestIdOf(body: Buffer): string | undefined {
  const scan = new AnswerScan()
  scan.push(body)
  const shape = scan.end()
  return shape.object ? shape.rawId : undefined
}
