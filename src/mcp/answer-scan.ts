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
}

/** What the scan found. */
export interface AnswerShape {
  /** One JSON object and nothing after it, every top-level key written without escapes. */
  readonly object: boolean
  /** Has a top-level `result` or `error` (whatever else it has: some clients test these first). */
  readonly response: boolean
  readonly error: boolean
  /**
   * Top-level `result` and `error` members written: a response has exactly one (JSON-RPC 2.0 §5:
   * either MUST NOT exist when the other does), so more is an answer readers take differently.
   */
  readonly answers: number
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

/**
 * The incremental scan: `push` each chunk as it arrives, then `end`. One loop over the bytes with
 * its state in locals (a property access per byte costs more than the comparisons), and a tight
 * inner loop for the bytes of strings, which are most of an answer.
 */
export class AnswerScan {
  private state = S.Before
  /** Nesting depth inside a top-level object or array value. */
  private depth = 0
  /** Inside a string (a key, a value, or one below the top level). */
  private inString = false
  /** The previous byte was a backslash inside a string. */
  private escaped = false
  /** The start of the top-level key being read, when it began in an earlier chunk. */
  private keyHead: string | undefined
  private keyEscaped = false
  /** A `,` came last at the top level: `}` may not follow. */
  private afterComma = false
  private current = K.Other
  private ids = 0
  private members = 0
  private response = false
  private error = false
  private answers = 0
  private idParts: Buffer[] | undefined
  private idBytes = 0
  /**
   * The chunk whose next backslash is known, and where it is (-1: none after it): looked up
   * afresh for every long string, it would be a scan of the rest of the chunk each time.
   */
  private bsChunk: Buffer | undefined
  private bsPos = -1

  push(b: Buffer): void {
    const n = b.length
    let state = this.state
    if (state === S.Bad) return
    let depth = this.depth
    let inString = this.inString
    let escaped = this.escaped
    let members = this.members
    /** Where the current key, or the id's value, started in this chunk. */
    let keyStart = state === S.InKey ? 0 : -1
    let idStart = this.current === K.Id && state >= S.InString && state <= S.Scalar ? 0 : -1
    let i = 0
    while (i < n) {
      if (inString) {
        if (escaped) {
          escaped = false
          i++
          continue
        }
        // The bytes of a string: only a quote or a backslash matters. Short strings are crossed
        // here; past 32 bytes, by the native search (memchr), which a JS loop cannot match.
        const near = i + 32 < n ? i + 32 : n
        while (i < near) {
          const d = b[i] as number
          if (d === QUOTE || d === BACKSLASH) break
          i++
        }
        if (i === near && near < n) i = this.nextSpecial(b, i)
        if (i === n) break
        const c = b[i++] as number
        if (c === BACKSLASH) {
          escaped = true
          // SECURITY: `"\u0069d"` is `id` to every reader; an escaped top-level key is no answer.
          if (state === S.InKey) this.keyEscaped = true
          continue
        }
        inString = false
        if (state === S.InKey) {
          this.current = this.keyOf(b, keyStart, i - 1)
          keyStart = -1
          state = S.Colon
        } else if (state === S.InString) state = S.After
        continue
      }
      if (state === S.Nested) {
        // Below the top level only strings, members and brackets matter: crossed in one loop.
        while (i < n) {
          const d = b[i++] as number
          if (d === QUOTE) {
            // A string below the top level: its first bytes here (most are short keys and
            // words), the rest, or an escape, by the string path above.
            const near = i + 16 < n ? i + 16 : n
            let e = 0
            while (i < near) {
              e = b[i] as number
              if (e === QUOTE || e === BACKSLASH) break
              i++
            }
            if (i < near && e === QUOTE) {
              i++
              continue
            }
            inString = true
            break
          }
          // Between strings: `:`, `,`, digits and white space are at or below 0x3a, brackets
          // above it; one comparison sends most of these bytes on.
          if (d <= 0x3a) {
            if (d === 0x3a) members++
          } else if (d === 0x7b || d === 0x5b) depth++
          else if ((d === 0x7d || d === 0x5d) && --depth === 0) {
            state = S.After
            break
          }
        }
        continue
      }
      const c = b[i++] as number
      switch (state) {
        case S.Before:
          if (c === 0x7b) state = S.Key
          else if (!isSpace(c)) state = S.Bad
          break
        case S.Key:
          if (c === QUOTE) {
            state = S.InKey
            inString = true
            keyStart = i
            this.keyHead = undefined
          } else if (c === 0x7d && !this.afterComma) state = S.Done
          else if (!isSpace(c)) state = S.Bad
          break
        case S.Colon:
          if (c === 0x3a) {
            state = S.Value
            members++
          } else if (!isSpace(c)) state = S.Bad
          break
        case S.Value:
          if (isSpace(c)) break
          this.afterComma = false
          this.startValue()
          if (this.current === K.Id) idStart = i - 1
          if (c === QUOTE) {
            state = S.InString
            inString = true
          } else if (c === 0x7b || c === 0x5b) {
            state = S.Nested
            depth = 1
          } else if (c === 0x2c || c === 0x7d) state = S.Bad
          else state = S.Scalar
          break
        case S.Scalar:
          if (c !== 0x2c && c !== 0x7d && !isSpace(c)) break
          state = S.After
          i-- // the delimiter is the After state's
          break
        case S.After:
          if (idStart !== -1) {
            this.keepId(b, idStart, i - 1)
            idStart = -1
          }
          if (c === 0x2c) {
            state = S.Key
            this.afterComma = true
            this.current = K.Other
          } else if (c === 0x7d) {
            state = S.Done
            this.current = K.Other
          } else if (!isSpace(c)) state = S.Bad
          break
        case S.Done:
          if (!isSpace(c)) state = S.Bad
          break
        case S.Bad:
          this.state = S.Bad
          return
      }
    }
    // A key or an id cut by the chunk's end: its start is kept for the next chunk.
    if (keyStart !== -1 && state === S.InKey)
      this.keyHead =
        (this.keyHead ?? '') + b.toString('latin1', keyStart, Math.min(n, keyStart + 8))
    if (idStart !== -1) this.keepId(b, idStart, n)
    this.state = state
    this.depth = depth
    this.inString = inString
    this.escaped = escaped
    this.members = members
  }

  /** The first quote or backslash at or after `i`, or `b.length`. */
  private nextSpecial(b: Buffer, i: number): number {
    if (b !== this.bsChunk || (this.bsPos !== -1 && this.bsPos < i)) {
      this.bsChunk = b
      this.bsPos = b.indexOf(BACKSLASH, i)
    }
    const q = b.indexOf(QUOTE, i)
    const bs = this.bsPos
    if (q === -1) return bs === -1 ? b.length : bs
    return bs !== -1 && bs < q ? bs : q
  }

  /** What the answer was; a body cut short is not an object. */
  end(): AnswerShape {
    const object = this.state === S.Done && !this.keyEscaped
    return {
      object,
      response: this.response,
      error: this.error,
      answers: this.answers,
      escapedKey: this.keyEscaped,
      members: this.members,
      rawId: this.ids === 1 && this.idParts !== undefined ? idText(this.idParts) : undefined,
    }
  }

  /** The key that ends just before `end` (its closing quote), begun at `start` or earlier. */
  private keyOf(b: Buffer, start: number, end: number): K {
    const head = this.keyHead
    if (head !== undefined) {
      this.keyHead = undefined
      return keyOf(head + b.toString('latin1', 0, Math.min(end, 8)))
    }
    const len = end - start
    if (len === 2) return b[start] === 0x69 && b[start + 1] === 0x64 ? K.Id : K.Other
    if (len === 5) return bytesAre(b, start, ERROR) ? K.Error : K.Other
    if (len !== 6) return K.Other
    return bytesAre(b, start, RESULT) ? K.Result : K.Other
  }

  private startValue(): void {
    const k = this.current
    if (k === K.Id) {
      this.ids++
      this.idParts = this.ids === 1 ? [] : undefined
      this.idBytes = 0
    } else if (k === K.Result) {
      this.response = true
      this.answers++
    } else if (k === K.Error) {
      this.response = true
      this.error = true
      this.answers++
    }
  }

  private keepId(b: Buffer, from: number, to: number): void {
    if (this.idParts === undefined || to <= from) return
    this.idBytes += to - from
    if (this.idBytes > MAX_ID_BYTES) this.idParts = undefined
    else this.idParts.push(b.subarray(from, to))
  }
}

const ERROR = [0x65, 0x72, 0x72, 0x6f, 0x72] as const
const RESULT = [0x72, 0x65, 0x73, 0x75, 0x6c, 0x74] as const

/** Whether the bytes at `at` are `word` (no string made for a key compared per answer). */
function bytesAre(b: Buffer, at: number, word: readonly number[]): boolean {
  for (let k = 0; k < word.length; k++) if (b[at + k] !== word[k]) return false
  return true
}

function keyOf(key: string): K {
  switch (key) {
    case 'id':
      return K.Id
    case 'result':
      return K.Result
    case 'error':
      return K.Error
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
 * request's id, a top-level key other readers may take for a protocol key, or a response that is
 * both a result and an error.
 */
export function answerProblem(
  shape: AnswerShape,
  expected: ExpectedId,
  status: number,
): ErrorCode | undefined {
  if (expected === undefined) return undefined
  // SECURITY: readers differ on an escaped key, so what the id is cannot be known here.
  if (shape.escapedKey) return 'upstream_unreadable'
  if (shape.object && ambiguous(shape)) return 'upstream_unreadable'
  if (!shape.object || !shape.response)
    return status < 300 && expected !== null ? 'upstream_unreadable' : undefined
  return idProblem(shape, expected)
}

/**
 * Why one message of an SSE stream cannot go to the client, or undefined: a response with
 * another request's id ends the answer, as does data that starts as JSON and is not one object,
 * and a response that is both a result and an error (on any stream, tied to a request or not).
 */
export function eventProblem(shape: AnswerShape, expected: ExpectedId): ErrorCode | undefined {
  if (!shape.object || ambiguous(shape)) return 'upstream_unreadable'
  if (!shape.response || expected === undefined) return undefined
  return idProblem(shape, expected)
}

/**
 * A response with both `result` and `error`, or either written twice, is a success to a client
 * that tests `result` first (or keeps the first key) and a failure to one that tests `error`
 * first (or keeps the last key): not JSON-RPC 2.0 (§5), and no answer either can rely on.
 */
function ambiguous(shape: AnswerShape): boolean {
  // SECURITY: every client must read the same outcome, or none gets this answer.
  return shape.answers > 1
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
