import { createHmac, randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import { parseRedactPath, type PathSegment } from '../config/redact-paths.js'
import { compilePatterns, type Matcher } from '../match/pattern.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { redactText } from './redact-shapes.js'

/**
 * The call arguments of an audit line (docs/operations.md "Audit log"): as sent (`full`), or with
 * every value under a credential-like name or a configured path, and every credential-shaped
 * string part, replaced by a marker with a keyed hash (`redacted`); in both modes cut
 * structurally to `maxArgumentBytes`, so the line stays valid JSON whatever was sent.
 */

/** Names whose values are always redacted (case-insensitive, `*` any run of characters). */
const DEFAULT_KEY_PATTERNS: readonly string[] = [
  '*password*',
  '*passwd*',
  '*passphrase*',
  '*secret*',
  '*token*',
  '*api_key*',
  '*api-key*',
  '*apikey*',
  '*access_key*',
  '*accesskey*',
  '*private_key*',
  '*private-key*',
  '*privatekey*',
  '*credential*',
  'auth',
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
]

/** What audit.ts needs of the config (config/schema.ts `audit`). */
export interface ArgumentsConfig {
  readonly arguments: 'none' | 'redacted' | 'full'
  readonly maxArgumentBytes: number
  readonly redaction: {
    readonly paths: readonly string[]
    readonly keys: readonly string[]
    readonly hashKey?: string | undefined
  }
}

/** Arguments as an audit line shows them. */
export interface ShownArguments {
  /** Plain JSON data: what `JSON.stringify` writes is the line's `arguments`. */
  readonly value: unknown
  /** When cut: the size in bytes of the whole arguments as compact JSON (the client's, unredacted). */
  readonly bytes: number | undefined
}

/** Turns a call's parsed arguments into what its audit line shows. */
export type ArgumentsView = (args: unknown, method: string | undefined) => ShownArguments

/** Containers deeper than this below the arguments are cut (the body's own depth is bounded too). */
export const MAX_ARGUMENT_DEPTH = 32
/**
 * How far past what can be shown a string is still scanned for credentials: a credential that
 * starts in the shown part and is longer than this could be shown in part.
 */
const SCAN_MARGIN = 64 * 1024
/** A cut string shorter than this is left out rather than shown as a stub. */
const MIN_CUT_STRING = 8
const CUT_MARK = '…'

let processKey: Buffer | undefined

/**
 * The key of the redaction hash: `audit.redaction.hashKey`, or one random key per process. With
 * the random key, equal values correlate only within one process lifetime (docs/operations.md).
 */
export function redactionKey(configured: string | undefined): { key: Buffer; generated: boolean } {
  if (configured !== undefined) return { key: Buffer.from(configured, 'utf8'), generated: false }
  processKey ??= randomBytes(32)
  return { key: processKey, generated: true }
}

/**
 * The marker a redacted value becomes: the first 16 hex digits (64 bits) of HMAC-SHA-256 under the
 * key, over the value's JSON text (a string with its quotes), so an equal value gives an equal
 * marker wherever it stands, and a value cannot be recovered or guessed without the key.
 */
export function redactionMark(key: Buffer, value: unknown): string {
  // A parsed body holds only JSON values; `?? 'null'` is for the type (undefined is none of them).
  const text = JSON.stringify(value) ?? 'null'
  return `[redacted:${createHmac('sha256', key).update(text).digest('hex').slice(0, 16)}]`
}

/** The view of a config (undefined for `none`), its key resolved; warns of a per-process key. */
export function argumentsViewFor(config: ArgumentsConfig, log: Logger): ArgumentsView | undefined {
  if (config.arguments === 'none') return undefined
  const { key, generated } = redactionKey(config.redaction.hashKey)
  if (generated && config.arguments === 'redacted') {
    log.warn(
      'audit.redaction.hashKey is not set: redaction markers use a random per-process key, so equal values correlate only within this process, not across restarts, replicas or workers',
    )
  }
  return compileArgumentsView(config, key)
}

/** Undefined for `arguments: none`: the line has no `arguments` field and nothing is computed. */
export function compileArgumentsView(
  config: ArgumentsConfig,
  key: Buffer,
): ArgumentsView | undefined {
  if (config.arguments === 'none') return undefined
  const rules: Rules | undefined =
    config.arguments === 'full'
      ? undefined
      : {
          key,
          keys: compilePatterns(
            [...DEFAULT_KEY_PATTERNS, ...config.redaction.keys].map((p) => p.toLowerCase()),
          ),
          paths: config.redaction.paths.map((p) => {
            const parsed = parseRedactPath(p)
            // The schema refused any other path (config/schema.ts).
            if (typeof parsed === 'string') throw new Error(`audit.redaction.paths: ${parsed}`)
            return parsed
          }),
        }
  const max = config.maxArgumentBytes
  const top = rules === undefined ? NO_PATHS : rules.paths.map((path) => ({ path, at: 0 }))
  return (args, method) => {
    const walk = new Walk(rules, max)
    // completion/complete names its argument in a field: `{name: "password", value: …}`.
    const named = rules !== undefined && method === 'completion/complete' && isRecord(args)
    const shown = named ? walk.completion(args, top) : walk.value(args, 0, top)
    if (!walk.cut) return { value: shown, bytes: undefined }
    return { value: shown === CUT ? null : shown, bytes: jsonBytes(args) }
  }
}

interface Rules {
  readonly key: Buffer
  readonly keys: Matcher
  readonly paths: readonly (readonly PathSegment[])[]
}

/** How far along one configured path a value is. */
interface PathState {
  readonly path: readonly PathSegment[]
  readonly at: number
}

const NO_PATHS: readonly PathState[] = []
const CUT = Symbol('cut')

/**
 * One walk over one call's arguments, building plain data within `left` bytes of JSON. Once
 * anything does not fit, the walk stops (`cut`): what is shown is the start of the arguments in
 * document order, each container closed, so the result always serialises to valid JSON.
 */
class Walk {
  cut = false
  private left: number

  constructor(
    private readonly rules: Rules | undefined,
    max: number,
  ) {
    this.left = max
  }

  value(v: unknown, depth: number, states: readonly PathState[]): unknown {
    if (this.cut) return CUT
    if (typeof v === 'string') return this.string(v)
    if (typeof v !== 'object' || v === null) return this.scalar(v)
    if (depth >= MAX_ARGUMENT_DEPTH || this.left < 2) return this.stop()
    this.left -= 2 // the brackets, reserved before any member so the container always closes
    return Array.isArray(v) ? this.array(v, depth, states) : this.object(v, depth, states)
  }

  /** `{name, value}` of completion/complete: `value` is judged under the name `name` gives. */
  completion(v: Record<string, unknown>, states: readonly PathState[]): unknown {
    const name = v['name']
    if (typeof name !== 'string' || !this.rules?.keys(name.toLowerCase()))
      return this.value(v, 0, states)
    return this.value({ ...v, value: this.mark(v['value']) }, 0, states)
  }

  private array(v: readonly unknown[], depth: number, states: readonly PathState[]): unknown {
    const out: unknown[] = []
    for (let i = 0; i < v.length; i++) {
      const before = this.left
      if (i > 0) this.left -= 1
      const next = advance(states, i)
      const item = this.redactsWhole(next) ? this.mark(v[i]) : v[i]
      const shown = this.value(item, depth + 1, next)
      if (shown === CUT) {
        this.left = before
        break
      }
      out.push(shown)
    }
    return out
  }

  private object(v: object, depth: number, states: readonly PathState[]): unknown {
    // No prototype: a member named `__proto__` (the client's choice) is data, never a setter.
    const out = Object.create(null) as Record<string, unknown>
    let first = true
    for (const [name, member] of Object.entries(v)) {
      const before = this.left
      const key = this.rules === undefined ? name : redactText(name, this.marker)
      // The member's name, its colon and (after the first) its comma.
      this.left -= jsonBytes(key) + (first ? 1 : 2)
      if (this.left < 0) {
        this.left = before
        this.stop()
        break
      }
      const next = advance(states, name)
      const whole = this.rules?.keys(name.toLowerCase()) === true || this.redactsWhole(next)
      const shown = this.value(whole ? this.mark(member) : member, depth + 1, next)
      if (shown === CUT) {
        this.left = before
        break
      }
      out[key] = shown
      first = false
    }
    return out
  }

  private string(s: string): unknown {
    const limit = this.left + SCAN_MARGIN
    // A string longer than that cannot fit: only the part that could be shown is scanned.
    const whole = s.length <= limit
    const scanned = whole ? s : s.slice(0, limit)
    const text = this.rules === undefined ? scanned : redactText(scanned, this.marker)
    if (whole) {
      const bytes = jsonBytes(text)
      if (bytes <= this.left) {
        this.left -= bytes
        return text
      }
    }
    return this.cutString(text)
  }

  /** The longest start of `text` that fits, ending in `…`; rescanned, since it is a new string. */
  private cutString(text: string): unknown {
    if (this.left < MIN_CUT_STRING) return this.stop()
    let lo = 0
    let hi = Math.min(text.length, this.left)
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (jsonBytes(text.slice(0, mid) + CUT_MARK) <= this.left) lo = mid
      else hi = mid - 1
    }
    let end = lo
    const last = text.charCodeAt(end - 1)
    if (last >= 0xd800 && last <= 0xdbff) end-- // never half a surrogate pair
    let cut = text.slice(0, end) + CUT_MARK
    if (this.rules !== undefined) cut = redactText(cut, this.marker)
    const bytes = jsonBytes(cut)
    if (bytes > this.left) return this.stop()
    this.left -= bytes
    this.cut = true
    return cut
  }

  private scalar(v: unknown): unknown {
    // A parsed body holds only JSON values; anything else is shown as null, as JSON.stringify does.
    const text = JSON.stringify(v) ?? 'null'
    if (text.length > this.left) return this.stop()
    this.left -= text.length
    return text === 'null' ? null : v
  }

  private stop(): typeof CUT {
    this.cut = true
    return CUT
  }

  private redactsWhole(states: readonly PathState[]): boolean {
    return this.rules !== undefined && states.some((s) => s.at === s.path.length)
  }

  private mark(v: unknown): string {
    return redactionMark((this.rules as Rules).key, v)
  }

  private readonly marker = (secret: string): string => this.mark(secret)
}

/** The states one step further, into member `step` (a name) or element `step` (an index). */
function advance(states: readonly PathState[], step: string | number): readonly PathState[] {
  if (states.length === 0) return NO_PATHS
  const next: PathState[] = []
  for (const s of states) {
    const seg = s.path[s.at]
    if (seg === undefined) continue
    const hit =
      typeof step === 'number'
        ? seg.kind === 'anyElement' || (seg.kind === 'index' && seg.index === step)
        : seg.kind === 'anyMember' || (seg.kind === 'name' && seg.name === step)
    if (hit) next.push({ path: s.path, at: s.at + 1 })
  }
  return next.length === 0 ? NO_PATHS : next
}

function jsonBytes(v: unknown): number {
  return Buffer.byteLength(JSON.stringify(v) ?? 'null', 'utf8')
}
