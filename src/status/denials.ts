import type { McpTarget } from '../mcp/classify.js'
import type { ConditionResult, Decision } from '../policy/policy.js'
import { callerLabel, type CallerId } from './caller.js'

/** Denials the page lists (newest first); older ones are only counted. */
export const RECENT_DENIALS = 100
/** Rules counted by name; a policy with more (no real one has) counts the rest under `(other)`. */
const MAX_RULES = 1000
/** Longest target name or URI kept (they are the caller's text). */
const MAX_TARGET = 256
/** The rule column of a denial no rule made: nothing allowed the target. */
const DEFAULT_DENY = '(default deny)'
const OTHER_RULES = '(other)'

/** One policy denial (or "would deny" under dry run), as status.json lists it. */
export interface DenialRecord {
  /** ISO time. */
  readonly at: string
  readonly server: string
  readonly method: string | null
  readonly kind: McpTarget['kind']
  /** The tool, prompt or method name, or the resource URI (bounded). */
  readonly target: string
  /** The deciding rule's name, or `(default deny)`. */
  readonly rule: string
  readonly reason: Decision['reason']
  /**
   * The condition that decided (docs/policy.md §Conditions), `rule if: false` or `rule unless:
   * error`: the deciding rule's, else the first evaluated (an allow whose `if` was false). Absent
   * when none was evaluated.
   */
  readonly condition?: string
  /** caller.ts callerLabel: a short hash unless `admin.showSubjects`. */
  readonly caller: string
  readonly dryRun: boolean
}

/** What one process knows of denials. */
export interface DenialsReport {
  /** Newest first, at most RECENT_DENIALS. */
  readonly recent: readonly DenialRecord[]
  /** Denials per rule name (`rule (if)`, `rule (unless)` when its condition decided) since start. */
  readonly byRule: Readonly<Record<string, number>>
  /** Decisions per deciding rule, allowed and denied, since start (`(default deny)`: no rule). */
  readonly hits: Readonly<Record<string, number>>
}

/** A denied decision as the audit log hands it over. */
export interface DeniedEvent {
  readonly caller: CallerId | undefined
  readonly server: string
  readonly method: string | undefined
  readonly target: McpTarget
  readonly decision: Decision
}

/**
 * The last denials and a count per rule, fed by the audit log's denial events (status/tap.ts), in
 * memory bounded by RECENT_DENIALS records and MAX_RULES counters whatever the traffic.
 */
export class DenialLog {
  /** A ring: `next` is where the following record goes. */
  private readonly ring: (DenialRecord | undefined)[] = []
  private next = 0
  private readonly rules = new Map<string, number>()
  private readonly hits = new Map<string, number>()

  constructor(
    private readonly showSubjects: boolean,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Counts a decision under the rule that made it, allowed or denied: the configuration section's
   * hit counts. One map update per policy decision, and only where the status page is configured.
   */
  decided(d: Decision): void {
    count(this.hits, d.rule?.name ?? DEFAULT_DENY)
  }

  denied(e: DeniedEvent): void {
    const target = e.target.kind === 'resource' ? e.target.uri : e.target.name
    const rule = e.decision.rule?.name ?? DEFAULT_DENY
    const condition = decidingCondition(e.decision)
    // A rule's denials by its condition are counted apart from its name-only ones.
    const decided = condition !== undefined && condition.rule === e.decision.rule?.name
    const key = decided ? `${rule} (${condition.kind})` : rule
    this.ring[this.next] = {
      at: new Date(this.now()).toISOString(),
      server: e.server,
      method: e.method ?? null,
      kind: e.target.kind,
      target: target.length <= MAX_TARGET ? target : `${target.slice(0, MAX_TARGET)}…`,
      rule,
      reason: e.decision.reason,
      ...(condition === undefined ? {} : { condition: conditionLabel(condition) }),
      caller: callerLabel(e.caller, this.showSubjects),
      dryRun: e.decision.dryRun,
    }
    this.next = (this.next + 1) % RECENT_DENIALS
    count(this.rules, key)
  }

  report(): DenialsReport {
    const recent: DenialRecord[] = []
    for (let i = 1; i <= this.ring.length; i++) {
      const r = this.ring[(this.next - i + RECENT_DENIALS) % RECENT_DENIALS]
      if (r !== undefined) recent.push(r)
    }
    return { recent, byRule: Object.fromEntries(this.rules), hits: Object.fromEntries(this.hits) }
  }
}

/** Adds one under `key`, or under `(other)` once MAX_RULES keys are counted. */
function count(counts: Map<string, number>, key: string): void {
  const counted = counts.has(key) || counts.size < MAX_RULES ? key : OTHER_RULES
  counts.set(counted, (counts.get(counted) ?? 0) + 1)
}

function decidingCondition(d: Decision): ConditionResult | undefined {
  return d.conditions.find((c) => c.rule === d.rule?.name) ?? d.conditions[0]
}

function conditionLabel(c: ConditionResult): string {
  return `${c.rule} ${c.kind}: ${'error' in c ? 'error' : String(c.value)}`
}
