import { existsSync, readFileSync, statSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { dirname, isAbsolute, resolve } from 'node:path'
import type { z } from 'zod'
import { checkAuthConfig } from '../auth/compile.js'
import { cardsProblems } from '../cards/build.js'
import { curationProblems, loadLockFor } from '../catalog/config.js'
import { checkVirtualServers } from '../config/virtual-check.js'
import { upstreamHeaderProblems } from '../mcp/owned-headers.js'
import {
  loadConfiguredPolicies,
  loadConfiguredPoliciesBeside,
  PolicyError,
} from '../policy/load.js'
import type { PolicySet } from '../policy/policy.js'
import { configSchema, type GatewayConfig } from '../config/schema.js'
import { knownKeys, suggestion } from '../config/did-you-mean.js'
import {
  located,
  locatePath,
  parseYamlSource,
  problemPath,
  type LocatedProblem,
  type YamlSource,
} from '../config/located.js'

/**
 * A config that failed to load. `problems` lists every error as `path: message` (one line each,
 * for logs and readiness warnings); `located` has the same problems with the file, line, column
 * and lines around each where they are known, for `mcp-edge check` and `serve` to print.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError'
  readonly problems: readonly string[]
  readonly located: readonly LocatedProblem[]
  constructor(problems: readonly (string | LocatedProblem)[]) {
    const all = problems.map((p) => (typeof p === 'string' ? { text: p } : p))
    super(`invalid config:\n  ${all.map((p) => p.text).join('\n  ')}`)
    this.problems = all.map((p) => p.text)
    this.located = all
  }
}

/** A validated, frozen config and where it came from (relative paths resolve against `dir`). */
export interface LoadedConfig {
  readonly config: GatewayConfig
  readonly file: string | undefined
  readonly dir: string
  /** The compiled `policies:` folder, loaded with the config so both are one snapshot. */
  readonly policy?: PolicySet | undefined
  /** When reading the files began (Date.now()): the watcher need not read older files again. */
  readonly readAt?: number
}

/**
 * Reads, validates and freezes a YAML config file. Throws ConfigError naming every problem.
 * `lock: false` skips reading `pinning.lockFile`: `mcp-edge pin` is what writes it.
 */
export function loadConfigFile(
  file: string,
  env: NodeJS.ProcessEnv = process.env,
  { lock = true }: { lock?: boolean } = {},
): LoadedConfig {
  const readAt = Date.now()
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    throw new ConfigError([`${file}: ${(err as Error).message}`])
  }
  return { ...parseConfigText(text, { file, dir: dirname(resolve(file)), env, lock }), readAt }
}

/**
 * loadConfigFile for a reload: the config is read as loadConfigFile reads it, and its policies
 * beside the running ones (policy/load.ts loadPolicySetBeside), so a large policy folder never
 * pauses the requests being served meanwhile; the rules of `running` an edit left as they were
 * are taken as they are.
 */
export async function loadConfigFileBeside(
  file: string,
  running?: PolicySet,
): Promise<LoadedConfig> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw new ConfigError([`${file}: ${(err as Error).message}`])
  }
  const dir = dirname(resolve(file))
  const loaded = parseConfigText(text, { file, dir, policies: false, again: true })
  try {
    return { ...loaded, policy: await loadConfiguredPoliciesBeside(loaded.config, dir, running) }
  } catch (err) {
    if (err instanceof PolicyError) throw new ConfigError(err.located)
    throw err
  }
}

/**
 * Validates config text (YAML or JSON); used by the loader, hot reload and tests. `policies:
 * false` leaves the policies to the caller (loadConfigFileBeside).
 */
export function parseConfigText(
  text: string,
  opts: {
    file?: string
    dir: string
    env?: NodeJS.ProcessEnv
    lock?: boolean
    policies?: boolean
    /**
     * A reload: text the last reload read is not parsed again (lastRead); what it refers to
     * (folders, the lock) is checked again all the same.
     */
    again?: boolean
  },
): LoadedConfig {
  const env = opts.env ?? process.env
  const { source, data } =
    opts.again === true && lastRead !== undefined && lastRead.text === text && lastRead.env === env
      ? { source: lastRead.source, data: structuredClone(lastRead.data) }
      : readText(text, opts.file, env)
  if (opts.again === true) lastRead = { text, env, source, data: structuredClone(data) }
  const problems: string[] = []
  const fail = (): never => {
    throw new ConfigError(problems.map((p) => locateProblem(p, source, opts.file)))
  }
  problems.push(...crossCheck(data, opts.dir))
  if (problems.length > 0) return fail()
  // The pinning lock is part of the config: `check` and reloads report its problems too.
  if (opts.lock !== false) problems.push(...loadLockFor(data, opts.dir))
  if (problems.length > 0) return fail()
  const policy = opts.policies === false ? undefined : loadPolicies(data, opts.dir)
  return { config: deepFreeze(data), file: opts.file, dir: opts.dir, policy }
}

/**
 * The config text the last reload read, and what the YAML parser and the schema made of it: a
 * reload of an unchanged config file (most are of policies only) does not run them again. By
 * then their code is cold (V8 drops the bytecode of functions unused for a while), and running it
 * held the serving thread 20–30 ms at the start of every reload. Each reload gets a copy of its
 * own, frozen and given its lock as a fresh parse would be.
 */
let lastRead:
  | {
      readonly text: string
      readonly env: NodeJS.ProcessEnv
      readonly source: YamlSource
      readonly data: GatewayConfig
    }
  | undefined

/** The YAML parser's and the schema's reading of config text; ConfigError naming its problems. */
function readText(
  text: string,
  file: string | undefined,
  env: NodeJS.ProcessEnv,
): { source: YamlSource; data: GatewayConfig } {
  const source = parseYamlSource(text)
  const where = { file, source }
  if (source.errors.length > 0)
    throw new ConfigError(source.errors.map((e) => located(e.text, where, e.at, e.message)))
  const problems: string[] = []
  const raw = substituteEnv(source.doc.toJS() as unknown, env, '', problems)
  const parsed = configSchema.safeParse(raw ?? {})
  if (!parsed.success) problems.push(...parsed.error.issues.flatMap(formatIssue))
  if (problems.length > 0 || !parsed.success)
    throw new ConfigError(problems.map((p) => locateProblem(p, source, file)))
  return { source, data: parsed.data }
}

/** A problem `path: message` of the config file, at the place its path names. */
function locateProblem(text: string, source: YamlSource, file: string | undefined): LocatedProblem {
  const path = problemPath(text)
  if (path === undefined) return { text }
  return located(text, { file, source }, locatePath(source, path, { key: text.includes(UNKNOWN) }))
}

const ENV_REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/** Replaces `${NAME}` (or `${NAME:-default}`) in every string; a missing variable is an error. */
function substituteEnv(
  v: unknown,
  env: NodeJS.ProcessEnv,
  path: string,
  problems: string[],
): unknown {
  if (typeof v === 'string') {
    return v.replace(ENV_REF, (_m, name: string, fallback: string | undefined) => {
      const value = env[name]
      if (value !== undefined) return value
      if (fallback !== undefined) return fallback
      problems.push(`${path || '(root)'}: environment variable ${name} is not set`)
      return ''
    })
  }
  if (Array.isArray(v)) return v.map((x, i) => substituteEnv(x, env, `${path}[${i}]`, problems))
  if (typeof v === 'object' && v !== null) {
    const out: Record<string, unknown> = {}
    for (const [k, x] of Object.entries(v))
      out[k] = substituteEnv(x, env, path ? `${path}.${k}` : k, problems)
    return out
  }
  return v
}

const UNKNOWN = ': unknown key'

/** `servers.weather.upstreams[0].url: invalid URL`; one problem per unknown key. */
function formatIssue(issue: z.core.$ZodIssue): string[] {
  let path = ''
  for (const p of issue.path) {
    if (typeof p === 'number') path += `[${p}]`
    else path += path ? `.${String(p)}` : String(p)
  }
  if (issue.code === 'invalid_key') {
    return [`${path}: ${issue.issues.map((i) => i.message).join('; ')}`]
  }
  if (issue.code === 'unrecognized_keys') {
    const known = knownKeys(configSchema, issue.path)
    return issue.keys.map((k) => `${path ? `${path}.` : ''}${k}${UNKNOWN}${suggestion(k, known)}`)
  }
  return [`${path || '(root)'}: ${issue.message}`]
}

/** Policy files are part of the config: `check` and reloads report their problems too. */
function loadPolicies(c: GatewayConfig, dir: string): PolicySet | undefined {
  try {
    return loadConfiguredPolicies(c, dir)
  } catch (err) {
    if (err instanceof PolicyError) throw new ConfigError(err.located)
    throw err
  }
}

/** References and combinations the schema alone cannot express. */
function crossCheck(c: GatewayConfig, dir: string): string[] {
  const problems: string[] = []
  if (c.policies !== undefined) {
    const p = resolvePath(dir, c.policies)
    if (!existsSync(p) || !statSync(p).isDirectory())
      problems.push(`policies: folder ${c.policies} not found`)
  }
  const j = c.auth?.jwt
  if (j !== undefined) {
    const sources = [j.jwksUrl, j.jwksFile, j.publicKeyFile].filter((s) => s !== undefined)
    if (sources.length > 1)
      problems.push('auth.jwt: set at most one of jwksUrl, jwksFile, publicKeyFile')
    // Without one, keys come from the issuer's metadata, which names one issuer's keys.
    if (sources.length === 0 && typeof j.issuer !== 'string')
      problems.push('auth.jwt: with several issuers, set jwksUrl, jwksFile or publicKeyFile')
    for (const key of ['jwksFile', 'publicKeyFile'] as const) {
      const f = j[key]
      if (f !== undefined && !existsSync(resolvePath(dir, f)))
        problems.push(`auth.jwt.${key}: file ${f} not found`)
    }
  }
  problems.push(...checkAuthConfig(c, dir)) // key files, publicUrl shape, token exchange
  if (c.rateLimits?.redis === 'cache' && c.cache?.redis === undefined)
    problems.push('rateLimits.redis: "cache" needs cache.redis to be set')
  problems.push(...checkVirtualServers(c)) // members exist, no name shared with a server
  problems.push(...curationProblems(c)) // one shown name per definition, readable backend names
  problems.push(...cardsProblems(c)) // one public URL for Server Cards, never one built from requests
  for (const [name, s] of Object.entries(c.servers)) {
    problems.push(...upstreamHeaderProblems(name, s.headers)) // names the gateway owns, case twins
    if (s.requiredScopes.length > 0 && c.auth === undefined) {
      problems.push(`servers.${name}.requiredScopes: needs auth to be configured`)
    }
    if (
      typeof s.balance === 'object' &&
      s.balance.hash.startsWith('claim:') &&
      c.auth === undefined
    ) {
      problems.push(`servers.${name}.balance: hashing on a claim needs auth to be configured`)
    }
    s.routes.forEach((r, i) => {
      if (r.tools === undefined && r.prompts === undefined && r.resources === undefined) {
        problems.push(
          `servers.${name}.routes[${i}]: name at least one of tools, prompts, resources`,
        )
      }
    })
  }
  return problems
}

/** Resolves a config-relative path. */
function resolvePath(dir: string, p: string): string {
  return isAbsolute(p) ? p : resolve(dir, p)
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v)
    for (const x of Object.values(v)) deepFreeze(x)
  }
  return v
}
