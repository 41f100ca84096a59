/**
 * The gateway's one SSE reader (HTML Living Standard §9.2.6 "Interpreting an event stream"), used
 * by the passthrough framer, the result transform and the cache's listen stream.
 *
 * Events are framed on bytes: a line ends with CRLF, LF or CR, and an event ends at an empty line,
 * so the terminator is any two line ends in a row (`\n\n`, `\r\r`, `\r\n\r\n`, `\n\r\n`, …). A
 * CRLF may be split across chunks; the reader remembers a trailing CR so the LF that follows is
 * not taken for a second line end. Text is decoded only once an event is complete, so a
 * multi-byte character split across network chunks is never torn (a per-chunk decode turns
 * `Zürich ☃` into `Zürich ���`). Pure: no imports.
 */

const LF = 0x0a
const CR = 0x0d

/**
 * Complete events from one push, as received: `bytes` is all of them (with any blank lines
 * between them), `events` each one (subarrays of `bytes`; possibly none).
 */
export interface SseBatch {
  readonly bytes: Buffer
  readonly events: readonly Buffer[]
}

/** Splits a byte stream into complete events, holding back the start of an unfinished one. */
export class SseReader {
  private pending: Buffer | undefined
  /** Offset in `pending` where scanning resumes (everything before it has been scanned). */
  private scanned = 0
  /** Offset in `pending` of the current line's start. */
  private lineStart = 0
  /** The last byte scanned was a CR that ended a line: a following LF belongs to it. */
  private afterCr = false

  /** Bytes of an event that has not completed yet. */
  get heldBytes(): number {
    return this.pending === undefined ? 0 : this.pending.length
  }

  /** Hands over the held bytes of the unfinished event and starts afresh (a reader giving up). */
  take(): Buffer {
    const held = this.pending ?? Buffer.alloc(0)
    this.pending = undefined
    this.scanned = 0
    this.lineStart = 0
    this.afterCr = false
    return held
  }

  /** The events that `chunk` completes, or undefined when none did (the bytes are held). */
  push(chunk: Buffer): SseBatch | undefined {
    const data = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk])
    const events: Buffer[] = []
    let start = 0
    let lineStart = this.lineStart
    let afterCr = this.afterCr
    let i = this.scanned
    let nextLf = data.indexOf(LF, i)
    let nextCr = data.indexOf(CR, i)
    while (nextLf !== -1 || nextCr !== -1) {
      const isCr = nextCr !== -1 && (nextLf === -1 || nextCr < nextLf)
      i = isCr ? nextCr : nextLf
      if (!isCr && afterCr && i === lineStart) {
        // The LF of a CRLF whose CR already ended the line (or the event, just before `start`).
        lineStart = i + 1
        afterCr = false
        if (i === start) start = i + 1
      } else if (i === lineStart) {
        // An empty line: the event ends here (with the LF of a CRLF, when it is in this chunk).
        // One at the very start of an event (blank lines between events) dispatches nothing and
        // is handed on with the bytes, as no event of its own.
        let end = i + 1
        if (isCr && data[end] === LF) end++
        if (i > start) events.push(data.subarray(start, end))
        start = end
        lineStart = end
        afterCr = isCr && end === i + 1
        i = end - 1
      } else {
        lineStart = i + 1
        afterCr = isCr
      }
      if (nextLf !== -1 && nextLf <= i) nextLf = data.indexOf(LF, i + 1)
      if (nextCr !== -1 && nextCr <= i) nextCr = data.indexOf(CR, i + 1)
    }
    if (start === data.length) {
      this.pending = undefined
      this.scanned = 0
      this.lineStart = 0
    } else {
      this.pending = start === 0 ? data : data.subarray(start)
      this.scanned = data.length - start
      this.lineStart = lineStart - start
    }
    this.afterCr = afterCr
    if (start === 0) return undefined
    const bytes = start === data.length ? data : data.subarray(0, start)
    return { bytes, events }
  }
}

/** The fields of one complete event. */
export interface SseEvent {
  /** The `data` field (lines joined with `\n`); undefined when the event has none. */
  readonly data: string | undefined
  /** Every line that is not a `data` field (`event:`, `id:`, `retry:`, comments), in order. */
  readonly otherLines: readonly string[]
}

// fatal: a backend's invalid UTF-8 is refused where it matters, never silently replaced.
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * Decodes and parses one complete event (as given by {@link SseReader}). Throws TypeError on
 * invalid UTF-8. `first` strips the byte order mark the stream may start with (HTML §9.2.6).
 */
export function parseEvent(raw: Buffer, first = false): SseEvent {
  let text = decoder.decode(raw)
  if (first && text.charCodeAt(0) === 0xfeff) text = text.slice(1)
  let data: string | undefined
  const otherLines: string[] = []
  const lines = text.includes('\r') ? text.split(/\r\n|\n|\r/) : text.split('\n')
  for (const line of lines) {
    if (line.length === 0) continue
    if (line.startsWith('data')) {
      const c = line.charCodeAt(4)
      // `data` alone is a data field with an empty value; `data:x` and `data: x` carry x.
      if (Number.isNaN(c) || c === 0x3a) {
        const value = line.length <= 5 ? '' : line.slice(line.charCodeAt(5) === 0x20 ? 6 : 5)
        data = data === undefined ? value : `${data}\n${value}`
        continue
      }
    }
    otherLines.push(line)
  }
  return { data, otherLines }
}

/**
 * The event again with `data` in place of its data lines, keeping its `event:`, `id:`, `retry:`
 * and comment lines (an `id:` is the client's resumption point; spec streamable-http
 * §Resumability and Redelivery). `data` must not contain line breaks (serialised JSON never does).
 */
export function replaceData(event: SseEvent, data: string): Buffer {
  let out = ''
  for (const line of event.otherLines) out += `${line}\n`
  return Buffer.from(`${out}data: ${data}\n\n`)
}
