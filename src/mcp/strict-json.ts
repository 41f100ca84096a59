/**
 * Strict JSON for the bodies the gateway decides on.
 *
 * `JSON.parse` keeps the last of two duplicate keys; other parsers keep the first, and some (Go's
 * encoding/json) match keys case-insensitively. A body like `{"name":"read","name":"delete_all"}`
 * can therefore be allowed here and executed differently by the backend (Bishop Fox, "JSON
 * interoperability vulnerabilities"; MCP go-sdk#805). This scanner walks the text once before
 * `JSON.parse` and rejects such bodies where they matter: duplicate keys near the root, and at
 * the positions the gateway reads (docs/policy.md §What is refused before any decision) any key
 * that folds onto a deciding key without being it, `Params` or `paramſ` as much as `Name` next to
 * `name`. It bounds nesting depth and remembers the raw text of the top-level `id`, so error
 * replies and cache hits echo it byte for byte. Its fast mode (`ScanOptions.fast`) judges the same
 * keys but leaves the syntax of the rest to the `JSON.parse` that follows (docs/design/hot-path.md
 * §Body check).
 */

import type { ArgumentKeys, KeyLevel } from './argument-keys.js'
import { readerKey } from './key-fold.js'

export type JsonProblem =
  'syntax' | 'duplicate_key' | 'case_variant_key' | 'too_deep' | 'prototype_key'

/** Thrown by scanJson; `kind` maps to one row of the error table. */
export class JsonScanError extends Error {
  override readonly name = 'JsonScanError'
  constructor(
    readonly kind: JsonProblem,
    message: string,
  ) {
    super(message)
  }
}

export interface ScanOptions {
  /** Deepest allowed nesting of objects and arrays (root = 1). */
  readonly maxDepth: number
  /**
   * Cross what the gateway never judges instead of validating it: value strings are crossed to
   * their closing quote, and values below the key checks outside the deciding positions (the
   * contents of `arguments`, say) by their string boundaries and brackets, depth still bounded.
   * Exact on valid JSON, so the keys checked are the keys `JSON.parse` reads; on invalid JSON it
   * may pass, or fail for another reason than the strict scan. Only for a caller that runs
   * `JSON.parse` afterwards and asks the strict scan why before refusing (mcp/jsonrpc.ts).
   */
  readonly fast?: boolean
  /**
   * Judge keys at every depth, not only where the gateway decides: no duplicates anywhere, and no
   * two keys of one object that a reader folding case (Go's encoding/json) or stopping at U+0000
   * (C readers) reads as one. For bodies whose arguments a policy condition judges, so every
   * backend reads the arguments the condition read.
   */
  readonly allKeys?: boolean
  /**
   * The argument keys policy conditions read (argument-keys.ts; implies `allKeys`): at each level
   * they read, a key that is not one of them but that a reader folding case, stopping at NUL or
   * building objects by assignment reads as one is refused, alone as much as next to the exact key.
   */
  readonly reads?: ArgumentKeys | undefined
}

export interface ScanResult {
  /** Raw JSON text of the top-level `id` member, when the root is an object that has one. */
  readonly rawId: string | undefined
  /** True when the root value is an array (a JSON-RPC batch). */
  readonly isArray: boolean
}

/** Objects at this depth or shallower get duplicate-key checks (root, params, params.ref …). */
const KEY_CHECK_DEPTH = 3
/** Objects at this depth or shallower may not carry prototype-polluting keys. */
const PROTO_CHECK_DEPTH = 2
const PROTO_KEYS: readonly string[] = ['__proto__', 'constructor', 'prototype']

/**
 * The objects whose keys the gateway reads to decide (method, target, version, cacheability), and
 * those keys. Anything else, `arguments` and other user data included, is never judged by case.
 */
const OTHER = 0
const ROOT = 1
const PARAMS = 2
const REF = 3
const NOTIFICATIONS = 4
const META = 5
type Position =
  typeof OTHER | typeof ROOT | typeof PARAMS | typeof REF | typeof NOTIFICATIONS | typeof META

const DECIDING_KEYS: readonly (readonly string[])[] = [
  [],
  ['jsonrpc', 'id', 'method', 'params', 'result', 'error'],
  [
    'name',
    'uri',
    'ref',
    'arguments',
    'cursor',
    '_meta',
    'notifications',
    'taskId',
    'task',
    'requestState',
    'inputResponses',
  ],
  ['type', 'name', 'uri'],
  ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged', 'resourceSubscriptions'],
  [
    'io.modelcontextprotocol/protocolVersion',
    'io.modelcontextprotocol/clientInfo',
    'io.modelcontextprotocol/clientCapabilities',
    'io.modelcontextprotocol/logLevel',
  ],
]

/** Per position: the exact keys, and their folded forms (folded → exact). */
interface PositionKeys {
  /**
   * The keys by UTF-16 length (a folded match has the same length, so other lengths skip folding).
   * A key in the text that is one of them is read as this very string: no copy, and the checks
   * after it compare pointers instead of characters or hashes.
   */
  readonly byLength: readonly (readonly string[] | undefined)[]
  readonly folded: ReadonlyMap<string, string>
}

const POSITIONS: readonly PositionKeys[] = DECIDING_KEYS.map((keys) => {
  const byLength: (string[] | undefined)[] = []
  for (const k of keys) (byLength[k.length] ??= []).push(k)
  // Dense, so a read past a length that has no key stays a plain load.
  for (let n = 0; n < byLength.length; n++) byLength[n] ??= undefined
  return { byLength, folded: new Map(keys.map((k) => [readerKey(k), k])) }
})

/** Where the object under `key` sits, given where its parent sits (exact keys only). */
function childPosition(parent: Position, key: string): Position {
  if (parent === ROOT) return key === 'params' ? PARAMS : OTHER
  if (parent !== PARAMS) return OTHER
  if (key === 'ref') return REF
  if (key === 'notifications') return NOTIFICATIONS
  if (key === '_meta') return META
  return OTHER
}

const WS = new Uint8Array(0x21)
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1

/** Validates `text` as strict JSON (see `fast`); throws JsonScanError. Linear in the text length. */
export function scanJson(text: string, opts: ScanOptions): ScanResult {
  const s = new Scanner(text, opts.maxDepth, opts.fast === true, opts.allKeys === true, opts.reads)
  s.skipWs()
  const isArray = text.charCodeAt(s.i) === 0x5b
  s.value(1, ROOT, undefined)
  s.skipWs()
  if (s.i !== text.length) s.fail('syntax', 'unexpected data after the JSON value')
  return { rawId: s.rawId, isArray }
}

/** Past this many keys an object's seen-keys list becomes a Set. */
const SMALL_OBJECT = 16

/**
 * Keys seen in one object: a plain array while there are few (the common case, and cheaper than a
 * Set), a Set past that, so 10,000 keys stay linear.
 */
class KeySet {
  private list: string[] | undefined = []
  private set: Set<string> | undefined

  /** Adds `key`; false when it was already there. */
  add(key: string): boolean {
    if (this.list !== undefined) {
      if (this.list.includes(key)) return false
      this.list.push(key)
      if (this.list.length > SMALL_OBJECT) {
        this.set = new Set(this.list)
        this.list = undefined
      }
      return true
    }
    const set = this.set as Set<string>
    if (set.has(key)) return false
    set.add(key)
    return true
  }
}

const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39

class Scanner {
  i = 0
  rawId: string | undefined = undefined
  private readonly allKeys: boolean
  /** The level of `params` when conditions read the arguments. */
  private readonly params: KeyLevel | undefined

  constructor(
    private readonly t: string,
    private readonly maxDepth: number,
    private readonly fast: boolean,
    allKeys: boolean,
    reads: ArgumentKeys | undefined,
  ) {
    this.allKeys = allKeys || reads !== undefined
    this.params = reads?.params
  }

  fail(kind: JsonProblem, message: string): never {
    throw new JsonScanError(kind, message)
  }

  skipWs(): void {
    const t = this.t
    let i = this.i
    while (i < t.length) {
      const c = t.charCodeAt(i)
      if (c > 0x20 || WS[c] !== 1) break
      i++
    }
    this.i = i
  }

  /** A value; `level` is what conditions read of it (undefined: nothing, or not arguments). */
  value(depth: number, pos: Position, level: KeyLevel | undefined): void {
    if (depth > this.maxDepth) this.fail('too_deep', `nesting deeper than ${this.maxDepth}`)
    const t = this.t
    const c = t.charCodeAt(this.i)
    if (c === 0x22) {
      if (this.fast) this.i = this.stringEnd(this.i + 1) + 1
      else this.string(false)
      return
    }
    if (c === 0x7b || c === 0x5b) {
      // SECURITY: crossed only where object() judges no key (below KEY_CHECK_DEPTH, outside the
      // deciding positions, so below PROTO_CHECK_DEPTH too); the depth limit holds inside.
      if (this.fast && !this.allKeys && depth > KEY_CHECK_DEPTH && pos === OTHER)
        return this.cross(depth)
      return c === 0x7b ? this.object(depth, pos, level) : this.array(depth, level)
    }
    if (c === 0x2d || isDigit(c)) return this.number()
    const i = this.i
    if (c === 0x74 && t.startsWith('true', i)) return void (this.i += 4)
    if (c === 0x66 && t.startsWith('false', i)) return void (this.i += 5)
    if (c === 0x6e && t.startsWith('null', i)) return void (this.i += 4)
    this.fail('syntax', `unexpected character at offset ${i}`)
  }

  object(depth: number, pos: Position, level: KeyLevel | undefined): void {
    this.i++ // {
    const checkKeys = this.allKeys || depth <= KEY_CHECK_DEPTH || pos !== OTHER
    const seen = checkKeys ? new KeySet() : undefined
    // Keys as a case-folding or NUL-stopping reader sees them, for `allKeys`.
    const readAs = this.allKeys ? new KeySet() : undefined
    const deciding = pos === OTHER ? undefined : POSITIONS[pos]
    const checkProto = depth <= PROTO_CHECK_DEPTH || pos !== OTHER
    this.skipWs()
    if (this.t.charCodeAt(this.i) === 0x7d) return void this.i++
    for (;;) {
      this.skipWs()
      if (this.t.charCodeAt(this.i) !== 0x22) this.fail('syntax', `expected a key at ${this.i}`)
      // Keys deeper than the checked levels are skipped, not decoded.
      const key = checkKeys ? this.key(deciding) : (this.string(false) ?? '')
      // What conditions read below this key, when they read this level.
      let below: KeyLevel | undefined
      if (seen !== undefined) {
        if (!seen.add(key)) this.fail('duplicate_key', `duplicate key "${key}"`)
        let reads: string | undefined
        // SECURITY: a backend that matches keys case-insensitively (Go's encoding/json) reads
        // `Params`, `URI` or `ſcope` as the key we judged, or as the only one; refused whether or
        // not the exact spelling is there too.
        if (deciding !== undefined && deciding.byLength[key.length]?.includes(key) !== true) {
          // SECURITY: C readers (cJSON and its kin) end a key at U+0000, so `ref\u0000x` is `ref`
          // to them; judged on what such a reader sees (a reader key is as long as that).
          reads = readerKey(key)
          const meant =
            deciding.byLength[reads.length] !== undefined ? deciding.folded.get(reads) : undefined
          if (meant !== undefined)
            this.fail(
              'case_variant_key',
              `key ${JSON.stringify(key)} reads as "${meant}" in readers that fold case or stop at NUL`,
            )
        }
        // SECURITY: a condition read the key JSON.parse gives; a reader that folds case or stops
        // at NUL would take `Database` (or `database\u0000x`) for `database` and run with that
        // value instead (allKeys: bodies whose arguments a condition judges).
        if (readAs !== undefined) {
          reads ??= readerKey(key)
          if (!readAs.add(reads))
            this.fail(
              'case_variant_key',
              `key ${JSON.stringify(key)} reads as another key of its object in readers that fold case or stop at NUL`,
            )
          if (level !== undefined) below = this.judgeRead(level, key, reads)
          else if (pos === ROOT && key === 'params') below = this.params
        }
        if (checkProto && (key.length === 9 || key.length === 11) && PROTO_KEYS.includes(key))
          this.fail('prototype_key', `key "${key}" is not allowed`)
      }
      this.skipWs()
      if (this.t.charCodeAt(this.i) !== 0x3a) this.fail('syntax', `expected ':' at ${this.i}`)
      this.i++
      this.skipWs()
      const start = this.i
      this.value(depth + 1, deciding === undefined ? OTHER : childPosition(pos, key), below)
      if (pos === ROOT && key === 'id') this.rawId = this.t.slice(start, this.i)
      this.skipWs()
      const c = this.t.charCodeAt(this.i)
      if (c === 0x2c) {
        this.i++
        continue
      }
      if (c === 0x7d) return void this.i++
      this.fail('syntax', `expected ',' or '}' at ${this.i}`)
    }
  }

  /**
   * One key of a level conditions read (argument-keys.ts), `reads` its reader key: refused when
   * some reader takes it for another key the conditions read; else the level below it.
   */
  judgeRead(level: KeyLevel, key: string, reads: string): KeyLevel | undefined {
    // SECURITY: an object built by assignment takes `__proto__`'s members for its own, so
    // `{"__proto__":{"bcc":…}}` has a `bcc` to such a backend that the condition never saw.
    if (key.length === 9 && key === '__proto__')
      this.fail('prototype_key', 'key "__proto__" is not allowed where a policy condition reads')
    const exact = level.exact[key.length]
    if (exact !== undefined) for (const e of exact) if (e.key === key) return e.below
    const spelled = level.spelled[reads.length]
    let meant: string | undefined
    if (spelled !== undefined) {
      for (const s of spelled) {
        if (s.key === key) return level.other
        if (s.reads === reads) meant = s.key
      }
    }
    // SECURITY: a lone `Bcc`, `BCC` or `bcc\u0000` is `bcc` to Go (a struct field matched
    // without an exact spelling) or to a C reader, while `has(args.bcc)` saw no `bcc`.
    if (meant !== undefined)
      this.fail(
        'case_variant_key',
        `key ${JSON.stringify(key)} reads as "${meant}", which a policy condition reads, in readers that fold case or stop at NUL`,
      )
    // SECURITY: where a condition reads every key, one a C reader cuts short is another key to
    // that reader than the one the condition saw.
    if (level.every && key.includes('\0'))
      this.fail(
        'case_variant_key',
        `key ${JSON.stringify(key)} reads as another key in readers that stop at NUL, where a policy condition reads every key`,
      )
    return level.other
  }

  array(depth: number, level: KeyLevel | undefined): void {
    this.i++ // [
    this.skipWs()
    if (this.t.charCodeAt(this.i) === 0x5d) return void this.i++
    for (;;) {
      this.skipWs()
      // Conditions read elements by position (`[0]`) or all of them: the level below any key.
      this.value(depth + 1, OTHER, level?.other)
      this.skipWs()
      const c = this.t.charCodeAt(this.i)
      if (c === 0x2c) {
        this.i++
        continue
      }
      if (c === 0x5d) return void this.i++
      this.fail('syntax', `expected ',' or ']' at ${this.i}`)
    }
  }

  /**
   * A key, decoded. Fast mode finds its end with indexOf and reads a key of `known` as that very
   * string: no copy, and the checks after it compare pointers, not characters or hashes. A key
   * with a backslash (an escape, or the quote found was escaped) is decoded by the full scan.
   * Control characters are left to JSON.parse, as in every string of the fast mode.
   */
  key(known: PositionKeys | undefined): string {
    if (!this.fast) return this.string(true) as string
    const t = this.t
    const start = this.i + 1
    const end = t.indexOf('"', start)
    if (end === -1) this.fail('syntax', 'unterminated string')
    const key = t.slice(start, end)
    // A key of `known` has no backslash, so the quote found ends it.
    const same = known?.byLength[end - start]
    if (same !== undefined) {
      for (const k of same) {
        if (k === key) {
          this.i = end + 1
          return k
        }
      }
    }
    if (key.includes('\\')) return this.string(true) as string
    this.i = end + 1
    return key
  }

  /** Scans a string literal; returns its decoded value only when asked (keys), else nothing. */
  string(wanted: boolean): string | undefined {
    const t = this.t
    const start = ++this.i
    let escaped = false
    for (let i = start; i < t.length; i++) {
      const c = t.charCodeAt(i)
      if (c === 0x22) {
        this.i = i + 1
        if (!wanted) return undefined
        return escaped ? (JSON.parse(t.slice(start - 1, i + 1)) as string) : t.slice(start, i)
      }
      if (c < 0x20) this.fail('syntax', `control character in string at ${i}`)
      if (c === 0x5c) {
        escaped = true
        const n = t.charCodeAt(i + 1)
        if (n === 0x75) {
          if (!/^[0-9a-fA-F]{4}$/.test(t.slice(i + 2, i + 6))) this.fail('syntax', 'bad \\u escape')
          i += 5
        } else if ('"\\/bfnrt'.includes(t.charAt(i + 1)) && i + 1 < t.length) {
          i += 1
        } else this.fail('syntax', `bad escape at ${i}`)
      }
    }
    this.fail('syntax', 'unterminated string')
  }

  /**
   * Fast mode: the index of the quote that ends the string whose text starts at `from`. In valid
   * JSON a quote ends the string unless an odd run of backslashes precedes it (`\\` is one
   * escaped backslash; `\u` escapes have no quote or backslash in their digits). Control
   * characters and bad escapes are left to JSON.parse.
   */
  stringEnd(from: number): number {
    const t = this.t
    for (let q = t.indexOf('"', from); q !== -1; q = t.indexOf('"', q + 1)) {
      let b = q - 1
      while (t.charCodeAt(b) === 0x5c) b--
      if (((q - b) & 1) === 1) return q
    }
    this.fail('syntax', 'unterminated string')
  }

  /**
   * Fast mode: crosses the object or array at `depth`, whose keys nobody judges, by its string
   * boundaries and brackets. A container at the deepest allowed level must be empty, as in the
   * strict scan, where any value inside it is one level too deep. The rest of the syntax is
   * JSON.parse's to check.
   */
  cross(depth: number): void {
    const t = this.t
    const max = this.maxDepth
    let d = depth - 1
    let i = this.i
    for (;;) {
      const c = t.charCodeAt(i++)
      if (c === 0x22) i = this.stringEnd(i) + 1
      else if (c === 0x7b || c === 0x5b) {
        if (++d === max) {
          while (i < t.length && WS[t.charCodeAt(i)] === 1) i++
          const n = t.charCodeAt(i)
          if (n !== 0x7d && n !== 0x5d) this.fail('too_deep', `nesting deeper than ${max}`)
        }
      } else if (c === 0x7d || c === 0x5d) {
        if (--d < depth) break
      } else if (c !== c) this.fail('syntax', 'unterminated object or array')
    }
    this.i = i
  }

  /** `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, as long as it matches. */
  number(): void {
    const t = this.t
    let i = this.i
    if (t.charCodeAt(i) === 0x2d) i++
    let c = t.charCodeAt(i)
    if (c === 0x30) c = t.charCodeAt(++i)
    else if (c >= 0x31 && c <= 0x39) {
      do c = t.charCodeAt(++i)
      while (isDigit(c))
    } else this.fail('syntax', `bad number at ${this.i}`)
    if (c === 0x2e && isDigit(t.charCodeAt(i + 1))) {
      i += 2
      while (isDigit(t.charCodeAt(i))) i++
      c = t.charCodeAt(i)
    }
    if (c === 0x65 || c === 0x45) {
      let j = i + 1
      const sign = t.charCodeAt(j)
      if (sign === 0x2b || sign === 0x2d) j++
      if (isDigit(t.charCodeAt(j))) {
        i = j + 1
        while (isDigit(t.charCodeAt(i))) i++
      }
    }
    this.i = i
  }
}
