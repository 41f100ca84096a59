import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parseDocument } from 'yaml'
import { compileLimit, type SourcedLimit } from '../limits/rules.js'
import { compileRule, type CompiledRule, type SourcedRule } from './compile.js'
import { ConditionSyntaxError } from './condition-static.js'
import { PolicySet, type PolicyMode } from './policy.js'
import { formatPolicyIssue, policyFileSchema } from './schema.js'

/** A policy folder that failed to load; `problems` lists every error as `file: path: message`. */
export class PolicyError extends Error {
  override readonly name = 'PolicyError'
  constructor(readonly problems: readonly string[]) {
    super(`invalid policies:\n  ${problems.join('\n  ')}`)
  }
}

/** Where the policies are and what they are checked against. */
export interface PolicyLoadOptions {
  /** Absolute path of the folder. */
  readonly folder: string
  /** How the folder is named in messages (the configured `policies:` value). */
  readonly label: string
  readonly mode: PolicyMode
  /** Server names of the config: a rule naming another server literally is a typo. */
  readonly servers: readonly string[]
  /** Whether `auth:` is configured: a limit keyed on a claim cannot work without it. */
  readonly auth?: boolean
}

const POLICY_FILE = /^[^.].*\.ya?ml$/

/**
 * The policy files of a folder, sorted by name: `*.yaml` and `*.yml` directly inside it (no
 * subfolders, so `policies/examples/` is never loaded by accident; dotfiles such as editor swap
 * files are skipped). Symlinks are followed, as Kubernetes ConfigMap volumes need.
 */
function listPolicyFiles(folder: string): string[] {
  return readdirSync(folder)
    .filter((name) => POLICY_FILE.test(name) && statSync(join(folder, name)).isFile())
    .sort()
}

/** Reads, validates and compiles a policy folder. Throws PolicyError naming every problem. */
export function loadPolicySet(opts: PolicyLoadOptions): PolicySet {
  const problems: string[] = []
  let files: string[]
  try {
    files = listPolicyFiles(opts.folder)
  } catch (err) {
    throw new PolicyError([`${opts.label}: ${(err as Error).message}`])
  }
  const rules: SourcedRule[] = []
  const limits: SourcedLimit[] = []
  for (const file of files) {
    const label = `${opts.label.replace(/\/+$/, '')}/${file}`
    const read = readPolicyFile(join(opts.folder, file), label, problems)
    rules.push(...read.rules)
    limits.push(...read.limits)
  }
  problems.push(...crossCheck(rules, opts.servers))
  problems.push(...checkLimits(limits, opts.servers, opts.auth ?? true))
  if (problems.length > 0) throw new PolicyError(problems)
  const compiled = compileRules(rules, problems)
  if (problems.length > 0) throw new PolicyError(problems)
  const compiledLimits = limits.map(compileLimit)
  const id = createHash('sha256')
    .update(
      JSON.stringify([opts.mode, ...compiled.map((r) => r.id), ...compiledLimits.map((l) => l.id)]),
    )
    .digest('hex')
    .slice(0, 12)
  return new PolicySet(compiled, opts.mode, id, opts.servers, compiledLimits)
}

/** Compiles every rule; a condition that does not compile is a problem naming line and column. */
function compileRules(rules: readonly SourcedRule[], problems: string[]): CompiledRule[] {
  const compiled: CompiledRule[] = []
  for (const sourced of rules) {
    try {
      compiled.push(compileRule(sourced))
    } catch (err) {
      if (!(err instanceof ConditionSyntaxError)) throw err
      const field = sourced.rule.if !== undefined ? 'if' : 'unless'
      const line = err.line > 1 ? `line ${err.line}, ` : ''
      problems.push(`${sourced.source}.${field}: ${line}column ${err.column}: ${err.message}`)
    }
  }
  return compiled
}

/** Limits: unique names, known servers, keys that can work with this config. */
function checkLimits(
  limits: readonly SourcedLimit[],
  servers: readonly string[],
  auth: boolean,
): string[] {
  const problems: string[] = []
  const known = new Set(servers)
  const seen = new Map<string, string>()
  for (const { limit, source } of limits) {
    const first = seen.get(limit.name)
    if (first === undefined) seen.set(limit.name, source)
    else problems.push(`${source}.name: duplicate limit name "${limit.name}" (also ${first})`)
    limit.servers.forEach((s, i) => {
      // A misspelt server would silently limit nothing.
      if (!s.includes('*') && !known.has(s))
        problems.push(`${source}.servers[${i}]: no server named "${s}" in the config`)
    })
    // SECURITY: without auth there are no verified claims; every caller would share one bucket.
    if (!auth && limit.key.startsWith('claim:'))
      problems.push(`${source}.key: keying on a claim needs auth to be configured`)
    if (!auth && limit.when !== undefined)
      problems.push(`${source}.when: matching claims needs auth to be configured`)
  }
  return problems
}

interface PolicyFileContent {
  readonly rules: SourcedRule[]
  readonly limits: SourcedLimit[]
}

const NOTHING: PolicyFileContent = { rules: [], limits: [] }

/** Parses one file; problems are appended as `label: path: message`. */
function readPolicyFile(path: string, label: string, problems: string[]): PolicyFileContent {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    problems.push(`${label}: ${(err as Error).message}`)
    return NOTHING
  }
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false })
  if (doc.errors.length > 0) {
    problems.push(...doc.errors.map((e) => `${label}: yaml: ${e.message}`))
    return NOTHING
  }
  const raw: unknown = doc.toJS()
  // An empty file is refused, not read as "no rules": a half-written save must not deny everything.
  if (raw === null || raw === undefined) {
    problems.push(`${label}: the file is empty (expected rules: [...])`)
    return NOTHING
  }
  const parsed = policyFileSchema.safeParse(raw)
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      problems.push(...formatPolicyIssue(issue).map((p) => `${label}: ${p}`))
    }
    return NOTHING
  }
  return {
    rules: (parsed.data.rules ?? []).map((rule, i) => ({ rule, source: `${label} rules[${i}]` })),
    limits: (parsed.data.limits ?? []).map((limit, i) => ({
      limit,
      source: `${label} limits[${i}]`,
    })),
  }
}

function crossCheck(rules: readonly SourcedRule[], servers: readonly string[]): string[] {
  const problems: string[] = []
  const known = new Set(servers)
  const seen = new Map<string, string>()
  for (const { rule, source } of rules) {
    const first = seen.get(rule.name)
    if (first === undefined) seen.set(rule.name, source)
    else problems.push(`${source}.name: duplicate rule name "${rule.name}" (also ${first})`)
    rule.servers.forEach((s, i) => {
      // SECURITY: a misspelt server in a deny rule would silently deny nothing.
      if (!s.includes('*') && !known.has(s)) {
        problems.push(`${source}.servers[${i}]: no server named "${s}" in the config`)
      }
    })
  }
  return problems
}

/** The policies a config names (`policies:` resolved against the config's folder), if any. */
export function loadConfiguredPolicies(
  config: {
    readonly policies?: string | undefined
    readonly policyMode: PolicyMode
    readonly servers: object
    readonly auth?: object | undefined
  },
  dir: string,
): PolicySet | undefined {
  if (config.policies === undefined) return undefined
  return loadPolicySet({
    folder: resolve(dir, config.policies),
    label: config.policies,
    mode: config.policyMode,
    servers: Object.keys(config.servers),
    auth: config.auth !== undefined,
  })
}
