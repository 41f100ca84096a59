import { parseArgs } from 'node:util'
import { explainCatalog } from '../catalog/explain.js'
import { admitLikeServe, heldScopes } from './explain-admit.js'
import { explainScopes, parseScopes, type ScopeExplanation } from './explain-scopes.js'
import { ConfigError, loadConfigFile, type LoadedConfig } from '../runtime/load.js'
import { problemsText } from './problems.js'
import { EXPLAIN_USAGE } from './usage.js'
import { limitApplies, type CompiledLimit } from '../limits/rules.js'
import type { McpTarget } from '../mcp/classify.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { memberTargets, type MemberTarget } from '../virtual/explain-target.js'
import type { PolicyCaller } from '../match/claims.js'
import type { Decision, PolicySet } from '../policy/policy.js'
import { deadlineOf } from '../upstream/deadlines.js'
import type { GatewayConfig } from '../config/schema.js'

/** Exit codes of `mcp-edge explain`. */
const EXPLAIN_EXIT = { allow: 0, invalidConfig: 1, usage: 2, deny: 3 } as const

/** Where explain writes. */
export interface ExplainIo {
  out(text: string): void
  err(text: string): void
}

const q = (s: string): string => JSON.stringify(s)

const RULE_DRY = ' [mode: dry-run]'
const GLOBAL_DRY_RUN = ' (policyMode: dry-run)'
const DRY_RUN_NOTE = ' (dry run: not enforced, the request goes through)'

const NO_TARGET =
  'a known method that names no target for policy to judge: admitted, a list filtered item by item'

const NO_SCOPE =
  'the token lacks a scope this call needs (403 insufficient_scope; a client can step up)'

/** The `scopes` member of explain's JSON, when there is something to say. */
function scopesJson(s: ScopeExplanation | undefined): Record<string, unknown> {
  return s === undefined
    ? {}
    : { scopes: { needed: s.needed, held: s.held ?? null, missing: s.missing } }
}

const REASONS: Readonly<Record<Decision['reason'], string>> = {
  allow_rule: 'an allow rule matched and no deny rule did',
  deny_rule: 'a deny rule matched (deny wins over any allow)',
  default_deny: 'no rule allows it (default deny)',
  condition_error: "a matching rule's condition could not be evaluated (that denies)",
}

/** `mcp-edge explain`: what would the policy decide for this caller, target and server? */
export function explainCommand(file: string, args: readonly string[], io: ExplainIo): number {
  let opts
  try {
    opts = parseExplainArgs(args)
  } catch (err) {
    io.err(`mcp-edge explain: ${(err as Error).message}\n${EXPLAIN_USAGE}`)
    return EXPLAIN_EXIT.usage
  }
  let loaded
  try {
    loaded = loadConfigFile(file)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    io.err(problemsText(file, err))
    return EXPLAIN_EXIT.invalidConfig
  }
  const servers = Object.keys(loaded.config.servers)
  const virtual = loaded.config.virtualServers[opts.server]
  if (virtual !== undefined) return explainVirtual(virtual, opts, loaded, io)
  if (!servers.includes(opts.server)) {
    const known = servers.join(', ')
    io.err(`mcp-edge explain: no server "${opts.server}" in ${file} (servers: ${known})\n`)
    return EXPLAIN_EXIT.usage
  }
  // The name a client uses may be a curated one; policy judges the backend's (docs/catalog.md).
  const catalog = explainCatalog(loaded.config, opts.server, opts.target)
  const extra = catalog === undefined ? '' : `${catalog.lines.join('\n')}\n`
  const catalogJson = catalog === undefined ? {} : { catalog: catalog.json }
  if (catalog !== undefined && catalog.backend === undefined) {
    const json = JSON.stringify({ decision: 'deny', ...catalogJson })
    io.out(opts.json ? `${json}\n` : `decision: deny\n${extra}`)
    return EXPLAIN_EXIT.deny
  }
  const judged =
    catalog?.backend === undefined ||
    opts.target.kind === 'resource' ||
    opts.target.kind === 'method'
      ? opts
      : { ...opts, target: { kind: opts.target.kind, name: catalog.backend } }
  // The deadline keys on the backend's name, as policy does (docs/balancing.md "Deadlines").
  const deadline = explainDeadline(loaded.config, judged.server, judged.target)
  // Scopes come before policy, on the backend's names too (docs/auth.md §Scopes per tool).
  const held = heldScopes(opts.scopes, opts.caller)
  const scopes = explainScopes(loaded.config, opts.server, judged.server, judged.target, held)
  // The verdict is the gateway's own admission's (cli/explain-admit.ts), never a second reading.
  const verdict = admitLikeServe(
    loaded.config,
    loaded.policy,
    opts.server,
    judged.server,
    judged.target,
    opts.caller,
    opts.args,
    opts.scopes,
  )
  const scopeLine = scopes === undefined ? '' : `${scopes.line}\n`
  const scopeJson = scopesJson(scopes)
  if (verdict.kind === 'refused') return refusedBefore(verdict.code, opts, io)
  if (
    (scopes !== undefined && scopes.missing.length > 0) ||
    verdict.kind === 'insufficient_scope'
  ) {
    const json = JSON.stringify({
      decision: 'deny',
      reason: 'insufficient_scope',
      ...scopeJson,
      ...catalogJson,
    })
    io.out(opts.json ? `${json}\n` : `decision: deny\nreason: ${NO_SCOPE}\n${scopeLine}${extra}`)
    return EXPLAIN_EXIT.deny
  }
  const policy = loaded.policy
  const decision = verdict.decision
  if (policy !== undefined && decision === undefined) {
    // A known method naming no target (a list, discovery): admitted, its answer filtered per item.
    const limits = limitsJson(policy, judged)
    const json = { decision: 'allow', reason: 'no_target', limits, ...scopeJson, ...catalogJson }
    io.out(
      opts.json
        ? `${JSON.stringify({ ...json, deadline: deadline.json })}\n`
        : `decision: allow\nreason: ${NO_TARGET}\nlimits: ${limitsFor(policy, judged).map(describeLimit).join('; ') || '(none)'}\n${scopeLine}${extra}${deadline.line}\n`,
    )
    return EXPLAIN_EXIT.allow
  }
  if (policy === undefined || decision === undefined) {
    const json = JSON.stringify({
      decision: 'allow',
      policies: false,
      ...scopeJson,
      ...catalogJson,
      deadline: deadline.json,
    })
    io.out(
      opts.json
        ? `${json}\n`
        : `decision: allow\nreason: no policies configured\n${scopeLine}${extra}${deadline.line}\n`,
    )
    return EXPLAIN_EXIT.allow
  }
  const text = opts.json
    ? `${JSON.stringify({ ...toJson(decision, judged, policy), ...scopeJson, ...catalogJson, deadline: deadline.json })}\n`
    : `${describe(decision, judged, policy)}${scopeLine}${extra}${deadline.line}\n`
  io.out(text)
  return decision.allow ? EXPLAIN_EXIT.allow : EXPLAIN_EXIT.deny
}

/**
 * A virtual server has no rules of its own (docs/virtual-servers.md §Policy): each member that the
 * name can reach is explained on its own endpoint, with its own name. Allowed when one of them is.
 */
function explainVirtual(
  virtual: Parameters<typeof memberTargets>[0],
  opts: ExplainOptions,
  loaded: LoadedConfig,
  io: ExplainIo,
): number {
  const policy = loaded.policy
  const named: MemberTarget[] =
    opts.target.kind === 'method'
      ? virtual.members.map((member) => ({ member, target: opts.target, via: 'any' as const }))
      : memberTargets(virtual, opts.target)
  // A member's name is its curated one (docs/catalog.md §Curation): its policy judges the
  // backend's, and a name its catalog does not show leads nowhere.
  const candidates = named.flatMap((c) => {
    const t = c.target
    // Only the start of a shortened name is known: it is not a name a catalog could look up.
    if (c.via === 'shortened') return [c]
    const catalog = explainCatalog(loaded.config, c.member, t)
    if (catalog === undefined || (t.kind !== 'tool' && t.kind !== 'prompt')) return [c]
    if (catalog.backend === undefined) return []
    return [{ ...c, target: { kind: t.kind, name: catalog.backend } }]
  })
  if (candidates.length === 0) {
    io.out(
      opts.json
        ? `${JSON.stringify({ decision: 'deny', members: [] })}\n`
        : 'decision: deny\nreason: no member of this virtual server has that name\n',
    )
    return EXPLAIN_EXIT.deny
  }
  let allowed = false
  const json: Record<string, unknown>[] = []
  for (const c of candidates) {
    const member = { ...opts, server: c.member, target: c.target }
    const t = c.target
    const own = t.kind === 'tool' || t.kind === 'prompt' ? t.name : undefined
    const names =
      c.exposed === undefined || own === undefined
        ? ''
        : c.via === 'shortened'
          ? ` (exposed ${q(c.exposed)}, shortened: its own name starts ${q(own)})`
          : ` (own name ${q(own)}, exposed ${q(c.exposed)})`
    if (c.via === 'shortened') {
      // The rest of the own name is only in the member's list: the decision needs all of it.
      if (opts.json)
        json.push({ member: c.member, via: c.via, exposed: c.exposed, startsWith: own })
      else
        io.out(
          `virtual server ${q(opts.server)} → member ${q(c.member)}${names}\ndecision: explain it by the member's own name (--server ${c.member})\n\n`,
        )
      continue
    }
    const via =
      (c.via === 'prefix'
        ? 'the prefix names it'
        : c.via === 'resources'
          ? 'its resources: route names it'
          : "if it serves the name (the members' lists decide at run time)") + names
    // A member's request keeps the member's own deadline (docs/virtual-servers.md).
    const deadline = explainDeadline(loaded.config, c.member, c.target)
    // The member's scopes, through this endpoint (docs/auth.md §Scopes per tool).
    const held = heldScopes(opts.scopes, opts.caller)
    const scopes = explainScopes(loaded.config, opts.server, c.member, c.target, held)
    const scopeLine = scopes === undefined ? '' : `${scopes.line}\n`
    // The member's own admission, through this endpoint, as `serve` asks it (cli/explain-admit.ts).
    // prettier-ignore
    const verdict = admitLikeServe(
      loaded.config, policy, opts.server, c.member, c.target, opts.caller, opts.args, opts.scopes,
    )
    if (verdict.kind === 'refused') {
      const at = { member: c.member, via: c.via, exposed: c.exposed }
      if (opts.json) json.push({ ...at, decision: 'deny', reason: verdict.code })
      else
        io.out(
          `virtual server ${q(opts.server)} → member ${q(c.member)}, ${via}\ndecision: deny\nreason: ${verdict.code}\n\n`,
        )
      continue
    }
    if (
      (scopes !== undefined && scopes.missing.length > 0) ||
      verdict.kind === 'insufficient_scope'
    ) {
      const at = { member: c.member, via: c.via, exposed: c.exposed }
      if (opts.json)
        json.push({ ...at, decision: 'deny', reason: 'insufficient_scope', ...scopesJson(scopes) })
      else
        io.out(
          `virtual server ${q(opts.server)} → member ${q(c.member)}, ${via}\ndecision: deny\nreason: ${NO_SCOPE}\n${scopeLine}\n`,
        )
      continue
    }
    const d = verdict.decision
    if (policy === undefined || d === undefined) {
      allowed = true
      if (opts.json)
        json.push({
          member: c.member,
          via: c.via,
          exposed: c.exposed,
          decision: 'allow',
          ...(policy === undefined ? { policies: false } : { reason: 'no_target' }),
          ...scopesJson(scopes),
          deadline: deadline.json,
        })
      else
        io.out(
          `virtual server ${q(opts.server)} → member ${q(c.member)}, ${via}\ndecision: allow\nreason: ${policy === undefined ? 'no policies configured' : NO_TARGET}\n${scopeLine}${deadline.line}\n\n`,
        )
      continue
    }
    if (d.allow) allowed = true
    if (opts.json)
      json.push({
        member: c.member,
        via: c.via,
        exposed: c.exposed,
        ...toJson(d, member, policy),
        ...scopesJson(scopes),
        deadline: deadline.json,
      })
    else
      io.out(
        `virtual server ${q(opts.server)} → member ${q(c.member)}, ${via}\n${describe(d, member, policy)}${scopeLine}${deadline.line}\n\n`,
      )
  }
  if (opts.json)
    io.out(
      `${JSON.stringify({ virtualServer: opts.server, decision: allowed ? 'allow' : 'deny', members: json })}\n`,
    )
  return allowed ? EXPLAIN_EXIT.allow : EXPLAIN_EXIT.deny
}

/** A call admission refuses before policy (a URI not in normal form, an unknown method). */
function refusedBefore(code: string, opts: ExplainOptions, io: ExplainIo): number {
  io.out(
    opts.json
      ? `${JSON.stringify({ decision: 'deny', reason: code })}\n`
      : `decision: deny\nreason: ${code} (refused before policy, as the gateway refuses it)\n`,
  )
  return EXPLAIN_EXIT.deny
}

interface ExplainOptions {
  readonly server: string
  readonly target: McpTarget
  readonly caller: PolicyCaller | undefined
  /** The call's arguments (`--args`); undefined: none. */
  readonly args: unknown
  /** The token's scopes (`--scopes`); undefined: not checked. */
  readonly scopes: ReadonlySet<string> | undefined
  readonly json: boolean
}

function parseExplainArgs(args: readonly string[]): ExplainOptions {
  const { values } = parseArgs({
    args: [...args],
    options: {
      config: { type: 'string', short: 'c' },
      claims: { type: 'string' },
      args: { type: 'string' },
      scopes: { type: 'string' },
      server: { type: 'string' },
      tool: { type: 'string' },
      prompt: { type: 'string' },
      resource: { type: 'string' },
      skill: { type: 'string' },
      method: { type: 'string' },
      json: { type: 'boolean' },
    },
    strict: true,
    allowPositionals: false,
  })
  if (values.server === undefined) throw new Error('--server is required')
  const named = [
    values.tool === undefined ? [] : [{ kind: 'tool', name: values.tool } as const],
    values.prompt === undefined ? [] : [{ kind: 'prompt', name: values.prompt } as const],
    values.resource === undefined ? [] : [{ kind: 'resource', uri: values.resource } as const],
    // A skill by the URI of its SKILL.md (docs/policy.md §Skills).
    values.skill === undefined ? [] : [{ kind: 'skill', name: values.skill } as const],
    values.method === undefined ? [] : [{ kind: 'method', name: values.method } as const],
  ].flat()
  const target = named[0]
  if (target === undefined || named.length > 1) {
    throw new Error('name exactly one of --tool, --prompt, --resource, --skill, --method')
  }
  const caller = parseClaims(values.claims)
  const callArgs = parseJsonObject(values.args, '--args')
  return {
    server: values.server,
    target,
    caller,
    args: callArgs,
    scopes: parseScopes(values.scopes),
    json: values.json === true,
  }
}

function parseClaims(text: string | undefined): PolicyCaller | undefined {
  const claims = parseJsonObject(text, '--claims')
  if (claims === undefined) return undefined
  const subject = typeof claims.sub === 'string' ? claims.sub : ''
  const issuer = typeof claims.iss === 'string' ? claims.iss : ''
  return { subject, issuer, claims }
}

function parseJsonObject(
  text: string | undefined,
  option: string,
): Record<string, unknown> | undefined {
  if (text === undefined) return undefined
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new Error(`${option} must be a JSON object`)
  }
  if (!isRecord(value)) throw new Error(`${option} must be a JSON object`)
  return value
}

/** `analysts-query-analytics if: false`, per condition evaluated, in rule order. */
function describeConditions(d: Decision): string {
  const each = d.conditions.map(
    (c) => `${c.rule} ${c.kind}: ${'error' in c ? `error (${c.error})` : String(c.value)}`,
  )
  return each.join('; ') || '(none evaluated)'
}

function describe(d: Decision, o: ExplainOptions, policy: PolicySet): string {
  const t = o.target
  const name = t.kind === 'resource' ? t.uri : t.name
  const c = o.caller
  const matched = policy.rulesFor(c, o.server)
  const r = d.rule
  const lines = [
    `decision: ${d.allow && !d.dryRun ? 'allow' : 'deny'}${d.dryRun ? DRY_RUN_NOTE : ''}`,
    `target: ${t.kind} ${JSON.stringify(name)} on server ${JSON.stringify(o.server)}`,
    `caller: ${c === undefined ? 'anonymous' : `sub ${q(c.subject)}, iss ${q(c.issuer)}`}`,
    `rule: ${r === undefined ? '(none)' : `${r.name} (${r.source})${r.dryRun ? RULE_DRY : ''}`}`,
    `reason: ${REASONS[d.reason]}`,
    `conditions: ${describeConditions(d)}`,
    `dry run: ${d.dryRun ? 'yes' : 'no'}${policy.mode === 'dry-run' ? GLOBAL_DRY_RUN : ''}`,
    `rules for this caller on ${o.server}: ${matched.map((r) => r.name).join(', ') || '(none)'}`,
    `limits: ${limitsFor(policy, o).map(describeLimit).join('; ') || '(none)'}`,
  ]
  return `${lines.join('\n')}\n`
}

function toJson(d: Decision, o: ExplainOptions, policy: PolicySet): Record<string, unknown> {
  const t = o.target
  return {
    decision: d.allow && !d.dryRun ? 'allow' : 'deny',
    enforced: !d.dryRun,
    server: o.server,
    kind: t.kind,
    target: t.kind === 'resource' ? t.uri : t.name,
    rule: d.rule?.name ?? null,
    source: d.rule?.source ?? null,
    reason: d.reason,
    conditions: d.conditions,
    dryRun: d.dryRun,
    policy: policy.id,
    limits: limitsJson(policy, o),
  }
}

function limitsJson(policy: PolicySet, o: ExplainOptions): Record<string, unknown>[] {
  return limitsFor(policy, o).map((l) => ({
    name: l.name,
    source: l.source,
    key: keyText(l),
    ...(l.rate && { rate: rateText(l), burst: l.rate.burst }),
    ...(l.concurrency !== undefined && { concurrency: l.concurrency }),
  }))
}

/** The method a target is named by (a `--method` names the method itself). */
const METHOD_OF = {
  tool: 'tools/call',
  prompt: 'prompts/get',
  resource: 'resources/read',
  event: 'events/poll',
  skill: 'skills/get',
} as const

/** The limits this caller's request for the target counts against (docs/rate-limits.md). */
function limitsFor(policy: PolicySet, o: ExplainOptions): CompiledLimit[] {
  const t = o.target
  const method = t.kind === 'method' ? t.name : METHOD_OF[t.kind]
  const targets = t.kind === 'method' ? [] : [t]
  return policy.limits.filter(
    (l) => l.servers(o.server) && limitApplies(l, o.caller, method, targets),
  )
}

/** The deadline a request for the target gets on `server` (docs/balancing.md "Deadlines"). */
function explainDeadline(
  config: GatewayConfig,
  server: string,
  t: McpTarget,
): { readonly line: string; readonly json: Record<string, unknown> } {
  const timeouts = config.servers[server]?.timeouts
  if (timeouts === undefined) return { line: 'deadline: (unknown server)', json: {} }
  const method = t.kind === 'method' ? t.name : METHOD_OF[t.kind]
  const d = deadlineOf(timeouts, method, t.kind === 'method' ? [] : [t])
  if (d.kind === 'stream')
    return {
      line: `deadline: none (a long-lived stream; at most timeouts.streamIdleMs ${timeouts.streamIdleMs} ms between events)`,
      json: { ms: null, source: 'stream' },
    }
  if (d.kind === 'server')
    return {
      line: `deadline: ${d.ms} ms to the response head (timeouts.responseHeadersMs; a streamed answer: timeouts.streamIdleMs ${timeouts.streamIdleMs} ms between events)`,
      json: { ms: d.ms, source: 'timeouts.responseHeadersMs', covers: 'head' },
    }
  return {
    line: `deadline: ${d.ms} ms to the response head and for a streamed answer whole (${d.source})`,
    json: { ms: d.ms, source: d.source, covers: 'answer' },
  }
}

function keyText(l: CompiledLimit): string {
  return l.key.from === 'claim' || l.key.from === 'header'
    ? `${l.key.from}:${l.key.name}`
    : l.key.from
}

const UNITS: Readonly<Record<number, string>> = {
  1000: 'second',
  60_000: 'minute',
  3_600_000: 'hour',
  86_400_000: 'day',
}

function rateText(l: CompiledLimit): string {
  return l.rate === undefined ? '' : `${l.rate.count}/${UNITS[l.rate.periodMs] ?? '?'}`
}

function describeLimit(l: CompiledLimit): string {
  const what =
    l.rate === undefined
      ? `concurrency ${l.concurrency ?? 0}`
      : `rate ${rateText(l)}, burst ${l.rate.burst}`
  return `${l.name} (${what}, key ${keyText(l)}; ${l.source})`
}
