/**
 * What the cache key reads of a request: its params as the raw body text says them, not as
 * `JSON.parse` left them. The parsed value loses what a backend may still see: integers past 2^53
 * round (`2^53+1` reads as `2^53`), a member named `__proto__` vanishes when copied into a plain
 * object, and of duplicate keys below the levels the strict scanner checks only the last survives.
 * Any of these would let two requests a backend answers differently share one entry (caching.mdx
 * §Cache Key: "the request parameters that affect the result"). See docs/cache.md §The key.
 *
 * Canonical form, chosen so that two requests share a text only when every JSON parser reads them
 * the same way:
 * - whitespace between tokens goes (insignificant to every parser, RFC 8259 §2);
 * - strings and keys are compared by their decoded value, re-encoded as JSON.stringify does, so
 *   `"a"` and `"\u0061"` are one value (RFC 8259 §7: an escape stands for its character);
 * - numbers keep their exact text (`1`, `1.0`, `1e0` and `-0` stay apart: an int/float-typed
 *   backend reads them differently, and big integers keep every digit);
 * - members keep their order and their duplicates (RFC 8259 §4: parsers may expose the order, and
 *   first-key-wins and last-key-wins parsers read duplicates differently).
 *
 * The body has passed the strict scanner (mcp/strict-json.ts) before this runs, so it is one JSON
 * object nested no deeper than `limits.maxJsonDepth`; anything unexpected throws, and the caller
 * then keeps the request out of the cache.
 */

/** The `_meta` member that carries the client's capabilities (basic/index.mdx, 2026-07-28). */
const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities'
const CAPS_FOLDED = CLIENT_CAPABILITIES.toLowerCase()

/** The parts of a request's params that a cache key covers, in canonical text. */
export interface KeyParams {
  /** Every params member but `_meta`, as `{…}`; '' when the request has no params at all. */
  readonly params: string
  /**
   * The client capabilities member(s) of `params._meta`, as `"name":value` joined by commas; ''
   * when absent. Case variants of the name count too, since a case-insensitive decoder (Go's
   * encoding/json) would read them. The rest of `_meta` (traceparent, progressToken, client info,
   * log level) never changes a result, and keying on it would split entries per request.
   */
  readonly capabilities: string
}

const NONE: KeyParams = { params: '', capabilities: '' }

/** Reads the key parts of the params of `body`, a strictly scanned JSON-RPC request. */
export function keyParamsOf(body: string): KeyParams {
  const r = new Reader(body)
  if (body.charCodeAt(0) === 0xfeff) r.i = 1 // a BOM is never part of the value
  r.ws()
  r.expect(0x7b)
  let out = NONE
  r.ws()
  if (r.peek() === 0x7d) return out
  for (;;) {
    r.ws()
    const isParams = r.keyIs('params')
    r.colon()
    // Another `params` would already have been refused as a duplicate key; if one got here,
    // both count (over-splitting is safe, sharing is not).
    if (isParams && r.peek() === 0x7b) out = join(out, r.params())
    else r.skip()
    if (r.next()) return out
  }
}

function join(a: KeyParams, b: KeyParams): KeyParams {
  if (a === NONE) return b
  return {
    params: `${a.params}${b.params}`,
    capabilities: a.capabilities === '' ? b.capabilities : `${a.capabilities},${b.capabilities}`,
  }
}

/**
 * One pass over the body. Most clients serialise with JSON.stringify: no whitespace and no escapes,
 * so a value's raw text already is its canonical text and is sliced, not rebuilt (valueText).
 */
class Reader {
  i = 0
  /** Set by str(): whether the literal just read had escapes. */
  private escaped = false
  /** Cleared by skip() on an escape or whitespace inside the value it moved past. */
  private clean = true

  constructor(private readonly t: string) {}

  peek(): number {
    return this.t.charCodeAt(this.i)
  }

  ws(): void {
    const t = this.t
    let i = this.i
    for (;;) {
      const c = t.charCodeAt(i)
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break
      i++
    }
    this.i = i
  }

  expect(c: number): void {
    if (this.t.charCodeAt(this.i) !== c) throw new Error(`unexpected JSON at offset ${this.i}`)
    this.i++
  }

  colon(): void {
    this.ws()
    this.expect(0x3a)
    this.ws()
  }

  /** After a member or element: true at the closing bracket (consumed), false after a comma. */
  next(): boolean {
    this.ws()
    const c = this.t.charCodeAt(this.i++)
    if (c === 0x2c) return false
    if (c === 0x7d || c === 0x5d) return true
    throw new Error(`unexpected JSON at offset ${this.i - 1}`)
  }

  /** Moves past a string literal; returns the offset of its opening quote. */
  private str(): number {
    const t = this.t
    const start = this.i
    if (t.charCodeAt(start) !== 0x22) throw new Error(`expected a string at offset ${start}`)
    let escaped = false
    for (let i = start + 1; i < t.length; i++) {
      const c = t.charCodeAt(i)
      if (c === 0x22) {
        this.i = i + 1
        this.escaped = escaped
        return start
      }
      if (c === 0x5c) {
        escaped = true
        i++ // the escaped character (or the `u` of \uXXXX: its hex digits never include a quote)
      }
    }
    throw new Error('unterminated string')
  }

  /** Reads a key; true when its decoded value is `name` (compared in place when unescaped). */
  keyIs(name: string): boolean {
    const start = this.str()
    if (!this.escaped) {
      return this.i - start - 2 === name.length && this.t.startsWith(name, start + 1)
    }
    return JSON.parse(this.t.slice(start, this.i)) === name
  }

  /** Reads a key; true when its decoded value equals `folded` ignoring case. */
  private keyFolds(folded: string): boolean {
    const start = this.str()
    if (!this.escaped && this.i - start - 2 !== folded.length) return false
    const raw = this.t.slice(start, this.i)
    const key = this.escaped ? (JSON.parse(raw) as string) : raw.slice(1, -1)
    return key.length === folded.length && key.toLowerCase() === folded
  }

  /** A string literal in canonical text: without escapes it already is (no `"`, `\`, controls). */
  private canonicalString(): string {
    const start = this.str()
    const raw = this.t.slice(start, this.i)
    return this.escaped ? JSON.stringify(JSON.parse(raw) as string) : raw
  }

  /** Canonical text of the value at the cursor: its raw text when that already is canonical. */
  valueText(): string {
    const start = this.i
    this.clean = true
    this.skip()
    if (this.clean) return this.t.slice(start, this.i)
    this.i = start
    return this.value()
  }

  /** Canonical text of the value at the cursor, rebuilt token by token. */
  private value(): string {
    const c = this.peek()
    if (c === 0x22) return this.canonicalString()
    if (c === 0x7b) {
      this.i++
      this.ws()
      if (this.peek() === 0x7d) {
        this.i++
        return '{}'
      }
      let out = '{'
      for (;;) {
        this.ws()
        out += this.canonicalString()
        this.colon()
        out += `:${this.value()}`
        if (this.next()) return `${out}}`
        out += ','
      }
    }
    if (c === 0x5b) {
      this.i++
      this.ws()
      if (this.peek() === 0x5d) {
        this.i++
        return '[]'
      }
      let out = '['
      for (;;) {
        this.ws()
        out += this.value()
        if (this.next()) return `${out}]`
        out += ','
      }
    }
    const start = this.i
    this.scalar()
    return this.t.slice(start, this.i)
  }

  /** Moves past a number or literal: its exact text, up to the next delimiter. */
  private scalar(): void {
    const t = this.t
    const start = this.i
    let i = start
    for (;;) {
      const d = t.charCodeAt(i)
      if (d !== d || d === 0x2c || d === 0x7d || d === 0x5d || d <= 0x20) break // NaN: the end
      i++
    }
    if (i === start) throw new Error(`unexpected JSON at offset ${start}`)
    this.i = i
  }

  /** Moves past the value at the cursor without building its text. */
  skip(): void {
    const t = this.t
    const c = this.peek()
    if (c === 0x22) {
      this.str()
      if (this.escaped) this.clean = false
      return
    }
    if (c !== 0x7b && c !== 0x5b) return this.scalar()
    let depth = 0
    for (;;) {
      const d = t.charCodeAt(this.i)
      if (d === 0x22) {
        this.str()
        if (this.escaped) this.clean = false
        continue
      }
      if (d !== d) throw new Error('unterminated JSON value')
      this.i++
      if (d === 0x7b || d === 0x5b) depth++
      else if (d === 0x7d || d === 0x5d) {
        if (--depth === 0) return
      } else if (d <= 0x20) this.clean = false
    }
  }

  /** The params object: every member but `_meta` kept in order, client capabilities set apart. */
  params(): KeyParams {
    this.i++ // {
    this.ws()
    if (this.peek() === 0x7d) {
      this.i++
      return { params: '{}', capabilities: '' }
    }
    let params = '{'
    let capabilities = ''
    for (;;) {
      this.ws()
      const at = this.i
      const isMeta = this.keyIs('_meta')
      this.colon()
      if (isMeta && this.peek() === 0x7b) capabilities = this.meta(capabilities)
      else {
        this.i = at
        if (params.length > 1) params += ','
        params += this.canonicalString()
        this.colon()
        params += `:${this.valueText()}`
      }
      if (this.next()) return { params: `${params}}`, capabilities }
    }
  }

  /** Adds the client capabilities members of a `_meta` object to `out`; skips the rest. */
  private meta(out: string): string {
    this.i++ // {
    this.ws()
    if (this.peek() === 0x7d) {
      this.i++
      return out
    }
    for (;;) {
      this.ws()
      const at = this.i
      if (this.keyFolds(CAPS_FOLDED)) {
        this.i = at
        if (out !== '') out += ','
        out += this.canonicalString()
        this.colon()
        out += `:${this.valueText()}`
      } else {
        this.colon()
        this.skip()
      }
      if (this.next()) return out
    }
  }
}
