import { compilePattern, type Matcher } from '../match/pattern.js'
import type { McpTarget } from '../mcp/classify.js'
import { isStreamMethod } from '../mcp/methods.js'

/** Where a deadline came from: `timeouts.methods`, `timeouts.tools` or `timeouts.prompts`. */
type DeadlineTable = 'methods' | 'tools' | 'prompts'

/** One configured deadline: its milliseconds and the key that set it (for explain, audit). */
export interface DeadlineRule {
  readonly ms: number
  readonly table: DeadlineTable
  /** The key as configured: a name, or a pattern with `*`. */
  readonly key: string
}

/** What a passed deadline reports (the audit line and the counter; runtime/runtime.ts). */
export interface DeadlineEvent {
  /** The server whose deadline it is (a virtual server's member: the member). */
  readonly server: string
  readonly method: string
  /** The tool or prompt the request named, when its deadline is per tool or per prompt. */
  readonly name: string | undefined
  readonly rule: DeadlineRule
  /** Before the response head (a 504 answer), or during a streamed answer (an in-band error). */
  readonly phase: 'head' | 'stream'
  readonly caller: { readonly subject: string; readonly issuer: string } | undefined
}

export type DeadlineReporter = (event: DeadlineEvent) => void

/**
 * The deadline of one request (endpoint/plan.ts makes it only when one applies: a request without
 * a configured deadline carries none and costs nothing). The attempt loop starts its clock; the
 * dispatch ends a streamed answer at it (docs/balancing.md "Deadlines").
 */
export class RequestDeadline {
  /** performance.now() at which the deadline passes, set when the attempt loop starts. */
  at = 0
  private reported = false

  constructor(
    readonly rule: DeadlineRule,
    private readonly server: string,
    private readonly method: string,
    private readonly name: string | undefined,
    private readonly caller: DeadlineEvent['caller'],
    private readonly report: DeadlineReporter,
  ) {}

  get ms(): number {
    return this.rule.ms
  }

  /** The request was cut at its deadline: audited and counted once. */
  expired(phase: DeadlineEvent['phase']): void {
    if (this.reported) return
    this.reported = true
    const { server, method, name, rule, caller } = this
    this.report({ server, method, name, rule, phase, caller })
  }
}

/** `servers.<name>.timeouts` as the config gives them (config/schema.ts). */
export interface DeadlineConfig {
  readonly methods?: Readonly<Record<string, number>> | undefined
  readonly tools?: Readonly<Record<string, number>> | undefined
  readonly prompts?: Readonly<Record<string, number>> | undefined
}

/**
 * One table of names and patterns (match/pattern.ts: `*` matches any run, everything else byte for
 * byte). The most specific key wins: an exact name before any pattern; among patterns, the one
 * with more literal characters, then the one with fewer `*`; patterns equally specific that both
 * match resolve to the shorter deadline, so the order of keys in a file never decides.
 */
class NameTable {
  private readonly exact = new Map<string, DeadlineRule>()
  private readonly globs: { readonly match: Matcher; readonly rule: DeadlineRule }[] = []

  constructor(table: DeadlineTable, entries: Readonly<Record<string, number>>) {
    const globs: { match: Matcher; rule: DeadlineRule; literal: number; stars: number }[] = []
    for (const [key, ms] of Object.entries(entries)) {
      const rule: DeadlineRule = Object.freeze({ ms, table, key })
      if (!key.includes('*')) {
        this.exact.set(key, rule)
        continue
      }
      const stars = key.split('*').length - 1
      globs.push({ match: compilePattern(key), rule, literal: key.length - stars, stars })
    }
    globs.sort((a, b) => b.literal - a.literal || a.stars - b.stars || a.rule.ms - b.rule.ms)
    for (const g of globs) this.globs.push({ match: g.match, rule: g.rule })
  }

  find(name: string): DeadlineRule | undefined {
    const rule = this.exact.get(name)
    if (rule !== undefined) return rule
    for (const g of this.globs) if (g.match(name)) return g.rule
    return undefined
  }
}

/**
 * A server's deadlines per method, per tool and per prompt, compiled once (runtime/runtime.ts). A
 * tool's or prompt's own deadline is more specific than its method's: `tools.slow_*` beats
 * `methods["tools/call"]`, which beats `responseHeadersMs`. Names are read from what the request
 * already says (Mcp-Method and Mcp-Name, or the body where it was parsed anyway): nothing is
 * parsed for a deadline.
 */
export class ServerDeadlines {
  private readonly methods: NameTable | undefined
  private readonly tools: NameTable | undefined
  private readonly prompts: NameTable | undefined

  constructor(
    readonly server: string,
    cfg: DeadlineConfig,
    private readonly report: DeadlineReporter,
  ) {
    this.methods = tableOf('methods', cfg.methods)
    this.tools = tableOf('tools', cfg.tools)
    this.prompts = tableOf('prompts', cfg.prompts)
  }

  /** The rule for a method and the targets it names; undefined: `responseHeadersMs` applies. */
  rule(method: string, targets: readonly McpTarget[]): DeadlineRule | undefined {
    const own = this.named(method, targets)
    if (own !== undefined) {
      const table = method === 'tools/call' ? this.tools : this.prompts
      const rule = table?.find(own)
      if (rule !== undefined) return rule
    }
    return this.methods?.find(method)
  }

  /** The deadline of one request, or undefined when none is configured for it. */
  forRequest(
    method: string,
    targets: readonly McpTarget[],
    caller: DeadlineEvent['caller'],
  ): RequestDeadline | undefined {
    const rule = this.rule(method, targets)
    if (rule === undefined) return undefined
    const name = this.named(method, targets)
    return new RequestDeadline(rule, this.server, method, name, caller, this.report)
  }

  /** The tool of a tools/call or the prompt of a prompts/get. */
  private named(method: string, targets: readonly McpTarget[]): string | undefined {
    const t = targets[0]
    if (t === undefined) return undefined
    if (method === 'tools/call') return t.kind === 'tool' ? t.name : undefined
    if (method === 'prompts/get') return t.kind === 'prompt' ? t.name : undefined
    return undefined
  }
}

function tableOf(
  table: DeadlineTable,
  entries: Readonly<Record<string, number>> | undefined,
): NameTable | undefined {
  return entries === undefined || Object.keys(entries).length === 0
    ? undefined
    : new NameTable(table, entries)
}

/** A server's deadlines, or undefined when it configures none (the common case costs nothing). */
export function compileDeadlines(
  server: string,
  cfg: DeadlineConfig,
  report: DeadlineReporter,
): ServerDeadlines | undefined {
  const none = (e: Readonly<Record<string, number>> | undefined): boolean =>
    e === undefined || Object.keys(e).length === 0
  if (none(cfg.methods) && none(cfg.tools) && none(cfg.prompts)) return undefined
  return new ServerDeadlines(server, cfg, report)
}

/** How explain names a rule: `timeouts.tools["slow_*"]`. */
export function ruleText(rule: DeadlineRule): string {
  return `timeouts.${rule.table}[${JSON.stringify(rule.key)}]`
}

/** What explain says applies to a request (cli/explain.ts). */
export type ExplainedDeadline =
  | { readonly kind: 'stream' }
  | { readonly kind: 'server'; readonly ms: number }
  | { readonly kind: 'own'; readonly ms: number; readonly source: string }

/**
 * The deadline a request for `method` and `targets` gets under `timeouts` (config/schema.ts),
 * exactly as the attempt loop applies it: its own, or the server's response-head timeout; a
 * long-lived stream has none.
 */
export function deadlineOf(
  timeouts: DeadlineConfig & { readonly responseHeadersMs: number },
  method: string,
  targets: readonly McpTarget[],
): ExplainedDeadline {
  if (isStreamMethod(method)) return { kind: 'stream' }
  const rule = compileDeadlines('', timeouts, ignore)?.rule(method, targets)
  if (rule === undefined) return { kind: 'server', ms: timeouts.responseHeadersMs }
  return { kind: 'own', ms: rule.ms, source: ruleText(rule) }
}

const ignore: DeadlineReporter = () => undefined
