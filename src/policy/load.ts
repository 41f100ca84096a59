import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { isScalar, type Node } from 'yaml'
import { knownKeys, suggestion } from '../config/did-you-mean.js'
import {
  located,
  locatePath,
  parseYamlSource,
  problemPath,
  type LocatedProblem,
  type Position,
  type YamlSource,
} from '../config/located.js'
import { compileLimit, type CompiledLimit, type SourcedLimit } from '../limits/rules.js'
import {
  checkRule,
  compileRule,
  movedRule,
  RuleMemo,
  type CompiledRule,
  type SourcedRule,
} from './compile.js'
import { ConditionSyntaxError } from './condition-static.js'
import { readFolderBeside } from './off-thread.js'
import { PolicySet, type PolicyMode } from './policy.js'
import { indexRules } from './rule-index.js'
import { quickYaml } from './quick-yaml.js'
import { itemsOf, readEdit, type RuleItems } from './rule-items.js'
import { formatPolicyIssue, policyFileSchema, type PolicyFile, type RuleConfig } from './schema.js'
import { skillPatternProblem } from './skill-reach.js'
import { Pacer, sliced } from './slices.js'

/**
 * A policy folder that failed to load; `problems` lists every error as `file: path: message`, and
 * `located` the same with the line, column and lines around each where they are known
 * (config/located.ts).
 */
export class PolicyError extends Error {
  override readonly name = 'PolicyError'
  readonly problems: readonly string[]
  readonly located: readonly LocatedProblem[]
  constructor(problems: readonly (string | LocatedProblem)[]) {
    const all = problems.map((p) => (typeof p === 'string' ? { text: p } : p))
    super(`invalid policies:\n  ${all.map((p) => p.text).join('\n  ')}`)
    this.problems = all.map((p) => p.text)
    this.located = all
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
  /**
   * A reload (loadPolicySetBeside) reads a folder with more bytes of policy files than this in a
   * process of its own (off-thread.ts): over 64 KiB by default.
   */
  readonly offThreadBytes?: number
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

/**
 * Reads, validates and compiles a policy folder. Throws PolicyError naming every problem. It is
 * read on this thread: a start or `mcp-edge check` serves nothing meanwhile, and a reader of its
 * own would add its own start, about a second for 10,000 rules, without leaving less in this heap.
 */
export function loadPolicySet(opts: PolicyLoadOptions): PolicySet {
  const read = readPolicyFolder(opts)
  return new PolicySet(read.compiled, opts.mode, read.id, opts.servers, read.compiledLimits)
}

/**
 * loadPolicySet beside a running policy (a reload, docs/policy.md §Hot reload): a folder over
 * `offThreadBytes` is read in a process of its own, and its rules are compiled and indexed in slices
 * of a few milliseconds, so requests go on being served meanwhile.
 */
export async function loadPolicySetBeside(
  opts: PolicyLoadOptions,
  running?: PolicySet,
): Promise<PolicySet> {
  if (folderBytes(opts) <= (opts.offThreadBytes ?? OFF_THREAD_BYTES)) return loadPolicySet(opts)
  // Compiled as the rules arrive, then indexed, both in slices that leave most of the serving
  // thread to requests (slices.ts Pacer); a rule the edit left as it was is the running one (one
  // it moved, a copy of it with its new source: movedRule), and an edit of a few rules patches
  // the running index instead of building one (rule-index.ts).
  const pacer = new Pacer()
  const memo = new RuleMemo()
  const read = await readFolderBeside(
    opts,
    (r) => compileRule(r, memo),
    pacer,
    running?.rules,
    movedRule,
  )
  if ('problems' in read) throw new PolicyError(read.problems)
  const limits = read.limits.map(compileLimit)
  const index = await sliced(indexRules(read.rules, opts.servers, limits, running), pacer)
  return new PolicySet(read.rules, opts.mode, read.id, opts.servers, limits, index)
}

/**
 * Folders larger than this are read off the serving thread: about 500 rules, whose parse takes
 * tens of milliseconds once the parser is warm and far longer before (docs/policy.md §What a
 * rule costs).
 */
const OFF_THREAD_BYTES = 64 * 1024

/** The bytes of the folder's policy files; 0 when it cannot be listed (reading says why). */
function folderBytes(opts: PolicyLoadOptions): number {
  try {
    return listPolicyFiles(opts.folder).reduce((n, f) => n + statSync(join(opts.folder, f)).size, 0)
  } catch {
    return 0
  }
}

/** What a read makes of each rule, at the least: its id (CompiledRule.id). */
type Compiled = { readonly id: string }

/**
 * A policy folder read and validated: its rules and limits as written, and compiled (each rule as
 * the reader's `compile` makes it: compileRule, or checkRule in the reload's reader).
 */
interface PolicyRead<R extends Compiled = CompiledRule> {
  readonly rules: readonly SourcedRule[]
  readonly limits: readonly SourcedLimit[]
  readonly compiled: R[]
  readonly compiledLimits: CompiledLimit[]
  readonly id: string
}

/** Reads, validates and compiles a policy folder. Throws PolicyError naming every problem. */
export function readPolicyFolder(opts: PolicyLoadOptions): PolicyRead
export function readPolicyFolder<R extends Compiled>(
  opts: PolicyLoadOptions,
  compile: (rule: SourcedRule, memo: RuleMemo) => R,
  kept?: KeptFiles,
): PolicyRead<R>
export function readPolicyFolder(
  opts: PolicyLoadOptions,
  compile: (rule: SourcedRule, memo: RuleMemo) => Compiled = compileRule,
  kept?: KeptFiles,
): PolicyRead<Compiled> {
  const problems: (string | LocatedProblem)[] = []
  let files: string[]
  try {
    files = listPolicyFiles(opts.folder)
  } catch (err) {
    throw new PolicyError([`${opts.label}: ${(err as Error).message}`])
  }
  const rules: SourcedRule[] = []
  const limits: SourcedLimit[] = []
  const sources = new Map<string, FileSource>()
  for (const file of files) {
    const label = `${opts.label.replace(/\/+$/, '')}/${file}`
    const path = join(opts.folder, file)
    const read = readPolicyFile(path, label, problems, kept)
    if (read.text !== undefined) sources.set(label, fileSource(shown(path), read.text, read.source))
    rules.push(...read.rules)
    limits.push(...read.limits)
  }
  kept?.keepOnly(files.map((file) => join(opts.folder, file)))
  problems.push(...crossCheck(rules, opts.servers))
  problems.push(...checkLimits(limits, opts.servers, opts.auth ?? true))
  const fail = (): never => {
    throw new PolicyError(problems.map((p) => locateProblem(p, sources)))
  }
  if (problems.length > 0) return fail()
  const compiled = compileRules(rules, problems, sources, compile)
  if (problems.length > 0) return fail()
  const compiledLimits = limits.map(compileLimit)
  const id = createHash('sha256')
    .update(
      JSON.stringify([opts.mode, ...compiled.map((r) => r.id), ...compiledLimits.map((l) => l.id)]),
    )
    .digest('hex')
    .slice(0, 12)
  return { rules, limits, compiled, compiledLimits, id }
}

/**
 * readPolicyFolder for the reload's reader (policy-reader.ts): every rule checked (checkRule),
 * none compiled, since the thread that takes the rules in compiles them.
 */
export function checkPolicyFolder(opts: PolicyLoadOptions): PolicyRead<Compiled> {
  return readPolicyFolder(opts, (rule) => lastRead.checked(rule), lastRead)
}

/**
 * The files the reader read last, and what each held (checkPolicyFolder; the reader is kept from
 * one reload to the next). A reload reads every file again, but parses, validates and checks only
 * those whose text changed: an edit of one file of a folder of many costs that one file. A file
 * with a problem is not kept, so its problems are found and placed again, as in a first read.
 */
class KeptFiles {
  private readonly files = new Map<string, KeptFile>()
  private readonly checks = new WeakMap<RuleConfig, Compiled>()

  /** What the file at `path` held when it had this `text` under this `label`, if kept. */
  get(path: string, label: string, text: string): PolicyFileContent | undefined {
    const file = this.files.get(path)
    // SECURITY: the whole text compared, so no edit can be taken for the text it replaced.
    return file !== undefined && file.label === label && file.text === text
      ? file.content
      : undefined
  }

  set(path: string, label: string, text: string, content: PolicyFileContent): void {
    this.files.set(path, { label, text, content })
  }

  /**
   * The file at `path` with this `text`, read again from what it held (rule-items.ts): only the
   * rule items the edit touched are parsed. Undefined when it must be read in full.
   */
  edited(path: string, label: string, text: string): PolicyFileContent | undefined {
    const file = this.files.get(path)
    if (file === undefined || file.label !== label) return undefined
    const items = (file.items ??= itemsOf(file.text, file.content) ?? null)
    if (items === null) return undefined
    const read = readEdit({ text: file.text, rules: file.content.rules, items }, text, label)
    if (read === undefined) return undefined
    const content: PolicyFileContent = { text, rules: read.rules, limits: [] }
    this.files.set(path, { label, text, content, items: read.items })
    return content
  }

  /** Forgets every file but `paths` (those of the last read). */
  keepOnly(paths: readonly string[]): void {
    const read = new Set(paths)
    for (const path of this.files.keys()) if (!read.has(path)) this.files.delete(path)
  }

  /**
   * checkRule, once per rule read: a kept file's rules, and the rules an edit left, are the same
   * objects. By the rule as written, not where it is (checkRule reads nothing else): an edit that
   * adds a rule moves the ones after it.
   */
  checked(sourced: SourcedRule): Compiled {
    let done = this.checks.get(sourced.rule)
    if (done === undefined) this.checks.set(sourced.rule, (done = checkRule(sourced)))
    return done
  }
}

interface KeptFile {
  readonly label: string
  readonly text: string
  readonly content: PolicyFileContent
  /** Where its rule items are, once an edit asked (null: it cannot be read item by item). */
  items?: RuleItems | null
}

const lastRead = new KeptFiles()

/** A policy file as problems name it (its label) and as a terminal shows it. */
interface FileSource {
  /** The file's path from the working folder, for `file:line:column`. */
  readonly file: string
  readonly source: YamlSource
}

/**
 * A FileSource whose text is parsed for positions only when a problem asks where it is: a file
 * quickYaml read has not been through `yaml`, and a folder without problems never needs it.
 */
function fileSource(file: string, text: string, parsed: YamlSource | undefined): FileSource {
  let source = parsed
  return {
    file,
    get source() {
      return (source ??= parseYamlSource(text))
    },
  }
}

/** A path as a terminal user can open it: relative to the working folder when inside it. */
function shown(path: string): string {
  const r = relative(process.cwd(), path)
  return r.startsWith('..') || r === '' ? path : r
}

/**
 * Compiles every rule; a condition that does not compile is a problem naming the rule, and the
 * line and column in the condition (and, located, in the file).
 */
function compileRules<R>(
  rules: readonly SourcedRule[],
  problems: (string | LocatedProblem)[],
  sources: ReadonlyMap<string, FileSource>,
  compile: (rule: SourcedRule, memo: RuleMemo) => R,
): R[] {
  const compiled: R[] = []
  const memo = new RuleMemo()
  for (const sourced of rules) {
    try {
      compiled.push(compile(sourced, memo))
    } catch (err) {
      if (!(err instanceof ConditionSyntaxError)) throw err
      const field = sourced.rule.if !== undefined ? 'if' : 'unless'
      const line = err.line > 1 ? `line ${err.line}, ` : ''
      const message = `${err.message} (rule ${JSON.stringify(sourced.rule.name)})`
      const text = `${sourced.source}.${field}: ${line}column ${err.column}: ${message}`
      const [label, path] = splitSource(`${sourced.source}.${field}`, sources)
      const file = label === undefined ? undefined : sources.get(label)
      const at =
        file === undefined || path === undefined
          ? undefined
          : conditionPosition(file.source, path, err.line, err.column)
      const shownMessage = `${path ?? ''}: rule ${JSON.stringify(sourced.rule.name)}: ${err.message}`
      problems.push(located(text, file ?? { file: undefined, source: undefined }, at, shownMessage))
    }
  }
  return compiled
}

/**
 * Where column `column` of line `line` of a condition is in its file: after the quote of a quoted
 * scalar, on the following lines of a block scalar (`if: |`). Escapes in a double-quoted
 * condition are not counted, so the column may be off by what they add.
 */
function conditionPosition(
  source: YamlSource,
  path: string,
  line: number,
  column: number,
): Position | undefined {
  const at = locatePath(source, path)
  if (at === undefined) return undefined
  const node = source.doc.getIn(pathSteps(path), true) as Node | undefined
  const type = isScalar(node) ? node.type : undefined
  if (type === 'BLOCK_LITERAL' || type === 'BLOCK_FOLDED') {
    // The block's indentation is its first content line's (YAML 1.2.2 §8.1.1.1); lines keep
    // whatever they have beyond it.
    const first = source.text.split(/\r?\n/)[at.line] ?? ''
    const indent = first.length - first.trimStart().length
    return { line: at.line + line, column: indent + column, length: 1 }
  }
  const quoted = type === 'QUOTE_DOUBLE' || type === 'QUOTE_SINGLE' ? 1 : 0
  return { line: at.line + line - 1, column: at.column + quoted + column - 1, length: 1 }
}

/** `rules[0].if` as the steps Document.getIn takes. */
function pathSteps(path: string): (string | number)[] {
  return [...path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) =>
    m[2] === undefined ? (m[1] as string) : Number(m[2]),
  )
}

/**
 * The file label and in-file path of a problem: `<label>: rules[0].alow: …` (schema problems) or
 * `<label> rules[0].name: …` (problems of a rule or limit, named by its source).
 */
function splitSource(
  text: string,
  sources: ReadonlyMap<string, FileSource>,
): [string | undefined, string | undefined] {
  for (const label of sources.keys()) {
    if (text.startsWith(`${label}: `)) return [label, problemPath(text.slice(label.length + 2))]
    if (text.startsWith(`${label} `)) {
      const rest = text.slice(label.length + 1)
      return [label, problemPath(rest) ?? rest]
    }
  }
  return [undefined, undefined]
}

/** A problem of a policy file, at the place its path names in that file. */
function locateProblem(
  problem: string | LocatedProblem,
  sources: ReadonlyMap<string, FileSource>,
): LocatedProblem {
  if (typeof problem !== 'string') return problem
  const [label, path] = splitSource(problem, sources)
  const file = label === undefined ? undefined : sources.get(label)
  if (file === undefined || path === undefined) return { text: problem }
  const key = problem.includes(UNKNOWN)
  const rest = problem.slice((label as string).length).replace(/^:? /, '')
  return located(problem, file, locatePath(file.source, path, { key }), rest)
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
        problems.push(
          `${source}.servers[${i}]: no server named "${s}" in the config${suggestion(s, known)}`,
        )
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
  /** The file's text, to place its problems (undefined when it could not be read). */
  readonly text?: string
  /** The text parsed by `yaml`, when it was (quickYaml read it otherwise). */
  readonly source?: YamlSource
}

const NOTHING: PolicyFileContent = { rules: [], limits: [] }
const UNKNOWN = ': unknown key'

/**
 * Reads and parses one file (a file `kept` holds with the same text: as it was parsed then);
 * problems are appended as `label: path: message`.
 */
function readPolicyFile(
  path: string,
  label: string,
  problems: (string | LocatedProblem)[],
  kept?: KeptFiles,
): PolicyFileContent {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    problems.push(`${label}: ${(err as Error).message}`)
    return NOTHING
  }
  const again = kept?.get(path, label, text) ?? kept?.edited(path, label, text)
  if (again !== undefined) return again
  const before = problems.length
  const content = parsePolicyFile(text, path, label, problems)
  if (problems.length === before) kept?.set(path, label, text, content)
  return content
}

/** Parses one file's text; problems are appended as `label: path: message`. */
export function parsePolicyFile(
  text: string,
  path: string,
  label: string,
  problems: (string | LocatedProblem)[],
): PolicyFileContent {
  // The quick reader first; anything it refuses, and any file with a problem, is read again by
  // `yaml`, which says where each problem is.
  const quick = quickYaml(text)
  if (quick !== undefined && quick !== null) {
    const parsed = policyFileSchema.safeParse(quick)
    if (parsed.success) return { text, ...sourced(parsed.data, label) }
  }
  const source = parseYamlSource(text)
  if (source.errors.length > 0) {
    const where = { file: shown(path), source }
    for (const e of source.errors)
      problems.push(located(`${label}: ${e.text}`, where, e.at, e.message))
    return { ...NOTHING, text, source }
  }
  const raw: unknown = source.doc.toJS()
  // An empty file is refused, not read as "no rules": a half-written save must not deny everything.
  if (raw === null || raw === undefined) {
    problems.push(`${label}: the file is empty (expected rules: [...])`)
    return { ...NOTHING, text, source }
  }
  const parsed = policyFileSchema.safeParse(raw)
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const texts =
        issue.code === 'unrecognized_keys'
          ? unknownKeys(issue.path, issue.keys)
          : formatPolicyIssue(issue)
      problems.push(...texts.map((p) => `${label}: ${p}`))
    }
    return { ...NOTHING, text, source }
  }
  return { text, source, ...sourced(parsed.data, label) }
}

/** A file's validated rules and limits, each named by where it is. */
function sourced(
  data: PolicyFile,
  label: string,
): { rules: SourcedRule[]; limits: SourcedLimit[] } {
  return {
    rules: (data.rules ?? []).map((rule, i) => ({ rule, source: `${label} rules[${i}]` })),
    limits: (data.limits ?? []).map((limit, i) => ({ limit, source: `${label} limits[${i}]` })),
  }
}

/** `rules[0].alow: unknown key (did you mean allow?)`, one per key, as formatPolicyIssue names them. */
function unknownKeys(path: readonly PropertyKey[], keys: readonly string[]): string[] {
  let at = ''
  for (const p of path) at += typeof p === 'number' ? `[${p}]` : at ? `.${String(p)}` : String(p)
  const known = knownKeys(policyFileSchema, path)
  return keys.map((k) => `${at ? `${at}.` : ''}${k}${UNKNOWN}${suggestion(k, known)}`)
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
        problems.push(
          `${source}.servers[${i}]: no server named "${s}" in the config${suggestion(s, known)}`,
        )
      }
    })
    // SECURITY: a skills pattern that can match no SKILL.md URI would silently deny nothing.
    for (const side of ['allow', 'deny'] as const)
      rule[side]?.skills?.forEach((p, i) => {
        const problem = skillPatternProblem(p)
        if (problem !== undefined) problems.push(`${source}.${side}.skills[${i}]: ${problem}`)
      })
  }
  return problems
}

/** Just the parts of a config that say where its policies are and what they are checked against. */
interface PoliciesConfig {
  readonly policies?: string | undefined
  readonly policyMode: PolicyMode
  readonly servers: object
  readonly auth?: object | undefined
}

function configuredOptions(config: PoliciesConfig, dir: string): PolicyLoadOptions | undefined {
  if (config.policies === undefined) return undefined
  return {
    folder: resolve(dir, config.policies),
    label: config.policies,
    mode: config.policyMode,
    servers: Object.keys(config.servers),
    auth: config.auth !== undefined,
  }
}

/** The policies a config names (`policies:` resolved against the config's folder), if any. */
export function loadConfiguredPolicies(config: PoliciesConfig, dir: string): PolicySet | undefined {
  const opts = configuredOptions(config, dir)
  return opts === undefined ? undefined : loadPolicySet(opts)
}

/** loadConfiguredPolicies beside a running policy (loadPolicySetBeside). */
export async function loadConfiguredPoliciesBeside(
  config: PoliciesConfig,
  dir: string,
  running?: PolicySet,
): Promise<PolicySet | undefined> {
  const opts = configuredOptions(config, dir)
  return opts === undefined ? undefined : loadPolicySetBeside(opts, running)
}
