import type { Logger } from 'pino'
import type { McpTarget } from '../mcp/classify.js'
import type { PolicyCaller } from '../match/claims.js'
import { clientIdOf } from '../match/clients.js'
import type { Decision } from '../policy/policy.js'
import type { LimitRefusal } from '../limits/limiter.js'
import { bounded, MAX_EXPORTED_CHARS } from './bound.js'
import { quote, quoteId, type LineSink } from './line-sink.js'
import type { ArgumentsView, ShownArguments } from './redact.js'

const ALLOWED = 'policy allowed'

/** A definition whose digest differs from its pin (docs/catalog.md §Run-time pinning). */
export interface DriftEvent {
  readonly server: string
  /**
   * `instructions`: the server's own instructions (name `instructions`; docs/catalog.md); `skills`:
   * a skill's manifest (name: its SKILL.md URI).
   */
  readonly kind: 'tools' | 'prompts' | 'instructions' | 'skills'
  /** The backend's own name. */
  readonly name: string
  /** The pinned digest, and the one the backend's list now gives. */
  readonly pinned: string
  readonly seen: string
  /** What clients get: `hidden` (onDrift: hide) or `served` (onDrift: warn). */
  readonly action: 'hidden' | 'served'
}

/** One policy decision on a named target, as the audit log records it. */
interface AuditEntry {
  readonly caller: PolicyCaller | undefined
  /** The request's id, on its access-log line and span too (docs/operations.md "Request ids"). */
  readonly requestId: string
  readonly server: string
  readonly method: string | undefined
  readonly target: McpTarget
  /** The call's arguments as parsed (endpoint/judge.ts argumentsOf); undefined when none. */
  readonly args?: unknown
  readonly decision: Decision
  /** Id of the policy set that decided (changes on every reload that changes a rule). */
  readonly policy: string
}

/** A request refused by a limit (docs/rate-limits.md). */
interface LimitEntry {
  readonly caller: PolicyCaller | undefined
  readonly server: string
  readonly method: string | undefined
  readonly limit: string
  /** The key kind (`claim:sub`, `ip` …); never its value, which may be a credential header. */
  readonly key: string
  /** Over the limit, or a new key its table had no room for (docs/rate-limits.md §Memory). */
  readonly reason: LimitRefusal
  readonly policy: string
}

/**
 * A verified caller refused before policy (docs/auth.md): its token lacks a scope the call needs,
 * or comes from a client application the server does not admit (no target: refused before the
 * body is read).
 */
interface AccessRefusal {
  readonly caller: PolicyCaller
  readonly requestId: string
  readonly server: string
  readonly method: string | undefined
  readonly target: McpTarget | undefined
  readonly reason: 'insufficient_scope' | 'client_not_allowed'
}

/** Writes the audit trail: one JSON line per decision, marked `audit: true`. */
export interface AuditLog {
  record(entry: AuditEntry): void
  rateLimited(entry: LimitEntry): void
  accessRefused(entry: AccessRefusal): void
  /** A definition whose digest is not its pin (docs/catalog.md §Run-time pinning). */
  drift(event: DriftEvent): void
}

/**
 * A child of the process logger with `audit: true`. It writes at `info` even when `log.level` is
 * higher (an audit trail that a log level can switch off is not one), but stays quiet under
 * `silent`. SECURITY: only `sub`, `iss` and the client application (`azp`, else `client_id`:
 * match/clients.ts) of the caller are written, never the token or other claims
 * (a log is read by more people than may hold credentials; RFC 6750 §5.3). Every value a client
 * chose or a token carries is cut to the one bound (observability/bound.ts). Call arguments are
 * written only with `audit.arguments` (`view`), as its mode and byte cap say (redact.ts).
 */
export function createAuditLog(log: Logger, sink?: LineSink, view?: ArgumentsView): AuditLog {
  const audit = log.child({ audit: true }, { level: log.level === 'silent' ? 'silent' : 'info' })
  // One line per decision is one per request under a policy: serialised by hand, as pino would.
  const lines = log.level === 'silent' ? undefined : sink
  return {
    record({ caller, requestId, server, method, target, args, decision, policy }) {
      const denied = !decision.allow || decision.dryRun
      // SECURITY: arguments only through the view: redacted, or full where configured, and capped.
      const shown = view === undefined || args === undefined ? undefined : view(args, method)
      if (lines !== undefined) {
        const name = named(target.kind === 'resource' ? target.uri : target.name)
        const rule = decision.rule?.name
        lines.emit(
          `${lines.head()},"audit":true,"requestId":${requestId === undefined ? 'null' : quoteId(bounded(requestId))}` +
            `,"sub":${nullable(caller?.subject)},"iss":${nullable(caller?.issuer)}` +
            `,"client":${nullable(clientIdOf(caller))}` +
            `,"server":${quote(server)},"method":${nullable(method)},"kind":"${target.kind}"` +
            `,"target":${quote(name.target)}${name.truncated ? ',"truncated":true' : ''}` +
            `,"decision":"${denied ? 'deny' : 'allow'}","rule":${nullable(rule)}` +
            `,"reason":${quote(decision.reason)},"dryRun":${decision.dryRun},"policy":${quote(policy)}` +
            (decision.conditions.length === 0 ? '' : conditionsJson(decision)) +
            (shown === undefined ? '' : argumentsJson(shown)) +
            `,"msg":"${decision.dryRun ? 'policy would deny (dry run)' : denied ? 'policy denied' : ALLOWED}"}\n`,
        )
        return
      }
      audit.info(
        {
          requestId: orNull(requestId),
          sub: orNull(caller?.subject),
          iss: orNull(caller?.issuer),
          client: orNull(clientIdOf(caller)),
          server,
          method: orNull(method),
          kind: target.kind,
          ...named(target.kind === 'resource' ? target.uri : target.name),
          decision: denied ? 'deny' : 'allow',
          rule: decision.rule?.name ?? null,
          reason: decision.reason,
          dryRun: decision.dryRun,
          policy,
          ...(decision.conditions.length === 0 ? {} : { conditions: conditionsOf(decision) }),
          ...(shown === undefined ? {} : argumentsFields(shown)),
        },
        decision.dryRun ? 'policy would deny (dry run)' : denied ? 'policy denied' : ALLOWED,
      )
    },
    rateLimited({ caller, server, method, limit, key, reason, policy }) {
      audit.info(
        {
          sub: orNull(caller?.subject),
          iss: orNull(caller?.issuer),
          server,
          method: orNull(method),
          decision: 'rate_limited',
          limit,
          key,
          reason,
          policy,
        },
        'rate limit refused a request',
      )
    },
    accessRefused({ caller, requestId, server, method, target, reason }) {
      audit.info(
        {
          requestId,
          sub: caller.subject,
          iss: caller.issuer,
          client: orNull(clientIdOf(caller)),
          server,
          method: orNull(method),
          ...(target !== undefined && {
            kind: target.kind,
            ...named(target.kind === 'resource' ? target.uri : target.name),
          }),
          decision: 'deny',
          reason,
        },
        reason === 'insufficient_scope' ? 'token lacks a scope' : 'client application not admitted',
      )
    },
    drift({ server, kind, name, pinned, seen, action }) {
      // Names and digests only: the new text is the backend's, and may be an attack on readers.
      audit.info(
        { server, kind, ...named(name), decision: 'catalog_drift', pinned, seen, action },
        'catalog definition differs from its pin',
      )
    },
  }
}

/** A request cut at its own deadline (docs/balancing.md "Deadlines"). */
export interface DeadlineEntry {
  readonly caller: { readonly subject: string; readonly issuer: string } | undefined
  readonly server: string
  readonly method: string
  /** The tool or prompt named, when the deadline was its own. */
  readonly name: string | undefined
  readonly deadlineMs: number
  /** The config key that set it: `timeouts.tools["slow_*"]`. */
  readonly rule: string
  readonly phase: 'head' | 'stream'
}

/**
 * The audit line of a request cut at its deadline, one per request (the drift lines' logger: a
 * child with `audit: true`, at `info` whatever `log.level` says but `silent`).
 */
export function createDeadlineAudit(log: Logger): (entry: DeadlineEntry) => void {
  const audit = log.child({ audit: true }, { level: log.level === 'silent' ? 'silent' : 'info' })
  return ({ caller, server, method, name, deadlineMs, rule, phase }) =>
    audit.info(
      {
        sub: orNull(caller?.subject),
        iss: orNull(caller?.issuer),
        server,
        method: bounded(method),
        ...(name === undefined ? {} : named(name)),
        decision: 'deadline_exceeded',
        deadlineMs,
        rule,
        phase,
      },
      'request deadline exceeded, upstream request cancelled',
    )
}

/**
 * The conditions evaluated for a decision (docs/policy.md §Conditions): rule, `if`/`unless`, the
 * value or the error. An error may quote a pattern the call built: bounded like any client value.
 */
function conditionsOf(decision: Decision): Record<string, unknown>[] {
  return decision.conditions.map((c) =>
    'error' in c
      ? { rule: c.rule, kind: c.kind, error: bounded(c.error) }
      : { rule: c.rule, kind: c.kind, value: c.value },
  )
}

function conditionsJson(decision: Decision): string {
  // JSON.stringify of plain data: well-formed (lone surrogates escaped), each error bounded.
  return `,"conditions":${JSON.stringify(conditionsOf(decision))}`
}

/** `arguments`, and `argumentsTruncated` / `argumentsBytes` when cut (docs/operations.md). */
function argumentsFields(shown: ShownArguments): Record<string, unknown> {
  if (shown.bytes === undefined) return { arguments: shown.value }
  return { arguments: shown.value, argumentsTruncated: true, argumentsBytes: shown.bytes }
}

/** The same fields as JSON members, each with its leading comma. */
function argumentsJson(shown: ShownArguments): string {
  // JSON.stringify of plain data: well-formed (lone surrogates escaped), within the view's cap.
  const value = `,"arguments":${JSON.stringify(shown.value)}`
  if (shown.bytes === undefined) return value
  return `${value},"argumentsTruncated":true,"argumentsBytes":${shown.bytes}`
}

/** A client-derived value as a JSON string (bounded), or `null`. */
function nullable(value: string | undefined): string {
  return value === undefined ? 'null' : quote(bounded(value))
}

function orNull(value: string | undefined): string | null {
  return value === undefined ? null : bounded(value)
}

function named(value: string): { target: string; truncated?: true } {
  if (value.length <= MAX_EXPORTED_CHARS) return { target: value }
  return { target: bounded(value), truncated: true }
}
