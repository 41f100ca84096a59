import type { McpTarget } from '../mcp/classify.js'
import type { ListFilter } from '../mcp/list-filter.js'
import type { CompiledLimit } from '../limits/rules.js'
import type { PolicyCaller } from '../match/claims.js'
import type { CompiledRule, TargetKind } from './compile.js'
import { RuleListFilter } from './list-view.js'

/** Why a decision came out the way it did. */
type DecisionReason = 'allow_rule' | 'deny_rule' | 'default_deny'

/** The outcome of checking one named target. */
export interface Decision {
  /** Whether the request may go on to the backend. */
  readonly allow: boolean
  /** The rule that decided; undefined when nothing allowed the target (default deny). */
  readonly rule: CompiledRule | undefined
  readonly reason: DecisionReason
  /** True when the policy denies but dry run (global or the deciding rule's) lets it through. */
  readonly dryRun: boolean
}

/** `enforce` blocks; `dry-run` evaluates and audits "would deny" but never blocks. */
export type PolicyMode = 'enforce' | 'dry-run'

interface Verdict {
  readonly allow: boolean
  readonly rule: CompiledRule | undefined
  readonly reason: DecisionReason
}

interface ServerRules {
  readonly all: readonly CompiledRule[]
  readonly enforced: readonly CompiledRule[]
  readonly hasDryRun: boolean
  /** Some enforced rule for this server has `when`: what a caller sees depends on who they are. */
  readonly identityDependent: boolean
}

const DEFAULT_DENY: Verdict = { allow: false, rule: undefined, reason: 'default_deny' }

/**
 * The compiled org-wide allowlist. Semantics (docs/policy.md): what no rule allows is denied; a
 * matching deny wins over any allow; a rule without `when` applies to every caller. Immutable: a
 * reload builds a new set and swaps it in whole.
 */
export class PolicySet {
  private readonly byServer = new Map<string, ServerRules>()

  constructor(
    readonly rules: readonly CompiledRule[],
    readonly mode: PolicyMode,
    /** Hash of every rule and the mode; tells reloads apart in logs. */
    readonly id: string,
    servers: Iterable<string>,
    /** `limits:` entries of the same files, in file order (docs/rate-limits.md). */
    readonly limits: readonly CompiledLimit[] = [],
  ) {
    for (const s of servers) this.byServer.set(s, this.select(s))
  }

  /** Decides whether `caller` may use `target` on `server`. Pure and synchronous. */
  check(caller: PolicyCaller | undefined, server: string, target: McpTarget): Decision {
    const rules = this.rulesFor(server)
    const kind = target.kind
    const value = target.kind === 'resource' ? target.uri : target.name
    const applicable = rules.all.filter((r) => appliesTo(r, caller))
    if (this.mode === 'dry-run') {
      const v = evaluate(applicable, kind, value)
      return { ...v, allow: true, dryRun: !v.allow }
    }
    if (!rules.hasDryRun) return { ...evaluate(applicable, kind, value), dryRun: false }
    const enforced = evaluate(
      applicable.filter((r) => !r.dryRun),
      kind,
      value,
    )
    if (!enforced.allow) return { ...enforced, dryRun: false }
    // A dry-run rule never changes the outcome; it only says what it would have done.
    const full = evaluate(applicable, kind, value)
    return full.allow ? { ...enforced, dryRun: false } : { ...full, allow: true, dryRun: true }
  }

  /**
   * The caller's view of list results on `server`, consistent with check(): an item is listed
   * exactly when calling it would not be blocked. Undefined in global dry run (nothing is hidden).
   */
  listFilter(caller: PolicyCaller | undefined, server: string): ListFilter | undefined {
    if (this.mode === 'dry-run') return undefined
    const rules = this.rulesFor(server)
    const matched = rules.enforced.filter((r) => appliesTo(r, caller))
    // Equal keys filter identically: same server, same rules (ids change with rule content).
    const key = JSON.stringify([server, ...matched.map((r) => r.id)])
    return new RuleListFilter(
      key,
      rules.identityDependent,
      (kind, value) => evaluate(matched, kind, value).allow,
    )
  }

  /** The rules whose `servers` match `server`, in file and rule order. */
  rulesFor(server: string): ServerRules {
    return this.byServer.get(server) ?? this.select(server)
  }

  private select(server: string): ServerRules {
    const all = this.rules.filter((r) => r.servers(server))
    const enforced = all.filter((r) => !r.dryRun)
    return {
      all,
      enforced,
      hasDryRun: enforced.length !== all.length,
      identityDependent: enforced.some((r) => r.when !== undefined),
    }
  }
}

function appliesTo(rule: CompiledRule, caller: PolicyCaller | undefined): boolean {
  return rule.when === undefined || rule.when(caller)
}

/** Deny wins over allow; the first matching rule in file order is the one reported. */
function evaluate(rules: readonly CompiledRule[], kind: TargetKind, value: string): Verdict {
  for (const r of rules) {
    if (r.deny[kind](value)) return { allow: false, rule: r, reason: 'deny_rule' }
  }
  for (const r of rules) {
    if (r.allow[kind](value)) return { allow: true, rule: r, reason: 'allow_rule' }
  }
  return DEFAULT_DENY
}
