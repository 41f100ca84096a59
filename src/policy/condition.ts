import { CelScalar, celEnv, isCelError, mapType, plan } from '@bufbuild/cel'
import { RE2JS } from 're2js'
import type { ConditionReads } from '../mcp/argument-keys.js'
import type { McpTarget } from '../mcp/classify.js'
import type { PolicyCaller } from '../match/claims.js'
import { clientIdOf } from '../match/clients.js'
import { readsOf } from './condition-keys.js'
import { checkCondition } from './condition-static.js'
import {
  ConditionInputError,
  MAX_VALUES,
  toCelValue,
  type CelInputValue,
} from './condition-values.js'

/**
 * `if:` and `unless:` of a rule (docs/policy.md §Conditions): a CEL expression over the call,
 * compiled once at policy load, evaluated per call, pure and bounded. `matches` is RE2 (cel-spec
 * langdef.md §Regular Expressions), evaluated by re2js in linear time, never by JavaScript RegExp.
 */

export type ConditionKind = 'if' | 'unless'

/** The outcome of one evaluation: a boolean, or why there is none (the call is then denied). */
type ConditionOutcome = { readonly value: boolean } | { readonly error: string }

/** What a condition reads of one call, converted once and shared by every rule of the check. */
export type ConditionInput =
  | {
      readonly vars: Readonly<Record<string, unknown>>
      readonly values: number
      readonly chars: number
    }
  | { readonly error: string }

export interface CompiledCondition {
  readonly kind: ConditionKind
  readonly source: string
  /** The argument keys it reads (condition-keys.ts), which no other reader may read otherwise. */
  readonly reads: ConditionReads
  evaluate(input: ConditionInput): ConditionOutcome
}

/** The variables every condition sees, and their CEL types. */
const VARIABLES = {
  /** The call's arguments (tools/call, prompts/get; completion/complete: `{name, value}`). */
  args: mapType(CelScalar.STRING, CelScalar.DYN),
  /** The verified token's claims; an empty map for an anonymous caller. */
  claims: mapType(CelScalar.STRING, CelScalar.DYN),
  /** The server's own name (a virtual server's member: the member's). */
  server: CelScalar.STRING,
  /** The tool or prompt name, or the resource URI, on the server's own names. */
  target: CelScalar.STRING,
  /** `tool`, `prompt`, `resource`, `event` or `method`. */
  kind: CelScalar.STRING,
  /** The token's `azp`, else its `client_id`, else "". */
  client: CelScalar.STRING,
} as const

/**
 * Estimated steps one evaluation may take: nodes × (input values + nodes + 1)^depth, times the
 * KiB of string text a step may scan. cel-spec has no cost model of its own for JavaScript
 * evaluators; this bound is what makes a condition over a large call refuse instead of spin.
 */
const COST_LIMIT = 1_000_000
/** Patterns built at run time (not literals) kept per condition. */
const MAX_DYNAMIC_PATTERNS = 32

/** Compiles one condition; throws ConditionSyntaxError (line, column, message). */
export function compileCondition(source: string, kind: ConditionKind): CompiledCondition {
  const patterns = new Map<string, Matcher>()
  const re2 = {
    compile(pattern: string): Matcher {
      let matcher = patterns.get(pattern)
      if (matcher === undefined) {
        // Invalid patterns throw; the evaluator turns that into an error (the call is denied).
        matcher = matcherOf(RE2JS.compile(pattern))
        if (patterns.size < shape.patterns.size + MAX_DYNAMIC_PATTERNS)
          patterns.set(pattern, matcher)
      }
      return matcher
    },
  }
  // SECURITY: `re2` replaces the evaluator's `matches`, so no pattern reaches JavaScript RegExp.
  const env = celEnv({ variables: VARIABLES, re2 })
  const shape = checkCondition(source, env)
  for (const [p, re] of shape.patterns) patterns.set(p, matcherOf(re))
  const run = plan(env, shape.parsed)
  return {
    kind,
    source,
    reads: readsOf(shape.parsed.expr),
    evaluate(input) {
      if ('error' in input) return { error: input.error }
      const steps = estimate(shape.nodes, shape.depth, input.values, input.chars)
      // SECURITY: refused before evaluation, so no call can make a condition run long.
      if (steps > COST_LIMIT)
        return { error: `cost limit exceeded (estimated ${steps} steps, limit ${COST_LIMIT})` }
      let result: unknown
      try {
        result = run(input.vars as never)
      } catch (err) {
        return { error: (err as Error).message }
      }
      if (isCelError(result)) return { error: result.message }
      if (typeof result !== 'boolean')
        return { error: `evaluates to a ${typeOf(result)}, not a bool` }
      return { value: result }
    },
  }
}

interface Matcher {
  test(text: string): boolean
}

/** CEL `matches` is a search anywhere in the text (langdef.md §Regular Expressions): RE2 test. */
function matcherOf(re: RE2JS): Matcher {
  return { test: (text) => re.test(text) }
}

function estimate(nodes: number, depth: number, values: number, chars: number): number {
  return nodes * (values + nodes + 1) ** depth * (1 + Math.ceil(chars / 1024))
}

function typeOf(v: unknown): string {
  if (v === null) return 'null'
  if (typeof v === 'bigint') return 'int'
  if (typeof v === 'number') return 'double'
  return typeof v
}

/** Converts what conditions read of one call; a refused input makes every condition deny. */
export function conditionInput(
  caller: PolicyCaller | undefined,
  server: string,
  target: McpTarget,
  args: unknown,
): ConditionInput {
  try {
    const a: CelInputValue = toCelValue(args ?? {})
    const c = toCelValue(caller?.claims ?? {}, MAX_VALUES - a.values)
    const vars = {
      args: a.value,
      claims: c.value,
      server,
      target: target.kind === 'resource' ? target.uri : target.name,
      kind: target.kind,
      // The same reading as `clients:` and `when.clients`, so a condition never sees another app.
      client: clientIdOf(caller) ?? '',
    }
    return { vars, values: a.values + c.values, chars: a.chars + c.chars }
  } catch (err) {
    if (err instanceof ConditionInputError) return { error: err.message }
    throw err
  }
}
