import { parse, type CelEnv } from '@bufbuild/cel'
import { RE2JS } from 're2js'

/**
 * What a condition is checked for at policy load, before any call: it parses, names only the
 * declared variables and functions CEL's standard library defines (with the right arity), builds
 * no protobuf messages, stays within the size limits, and every literal `matches` pattern is valid
 * RE2 (compiled here, once). Anything else is a policy error naming the column.
 */

type Parsed = ReturnType<typeof parse>
type CelExpr = Parsed['expr']

/** Longest condition text, and most AST nodes: both bound the work of one evaluation. */
const MAX_CONDITION_CHARS = 4096
const MAX_CONDITION_NODES = 1000
/** Deepest nesting of comprehensions (`all`, `exists`, `map`, `filter` inside one another). */
const MAX_COMPREHENSION_DEPTH = 3

/** A condition refused at load; `column` is 1-based in the condition's first line it sits on. */
export class ConditionSyntaxError extends Error {
  override readonly name = 'ConditionSyntaxError'
  constructor(
    readonly line: number,
    readonly column: number,
    message: string,
  ) {
    super(message)
  }
}

/** What the checks learned: the sizes the cost estimate needs and the literal patterns. */
export interface StaticShape {
  readonly parsed: Parsed
  readonly nodes: number
  readonly depth: number
  readonly patterns: ReadonlyMap<string, RE2JS>
}

interface Walk {
  nodes: number
  readonly patterns: Map<string, RE2JS>
  readonly env: CelEnv
  readonly at: (id: bigint, message: string) => ConditionSyntaxError
}

/** Parses and checks `source` against the variables of `env`; throws ConditionSyntaxError. */
export function checkCondition(source: string, env: CelEnv): StaticShape {
  if (source.length > MAX_CONDITION_CHARS)
    throw new ConditionSyntaxError(1, 1, `longer than ${MAX_CONDITION_CHARS} characters`)
  let parsed: Parsed
  try {
    parsed = parse(source)
  } catch (err) {
    const start = (err as { location?: { start?: { line: number; column: number } } }).location
      ?.start
    const message = (err as Error).message.replace(/^<input>:\d+:\d+: /, '')
    throw new ConditionSyntaxError(start?.line ?? 1, start?.column ?? 1, message)
  }
  const positions = parsed.sourceInfo?.positions ?? {}
  const at = (id: bigint, message: string): ConditionSyntaxError => {
    const offset = positions[id.toString()] ?? 0
    const before = source.slice(0, offset).split('\n')
    return new ConditionSyntaxError(before.length, (before.at(-1)?.length ?? 0) + 1, message)
  }
  const walk: Walk = { nodes: 0, patterns: new Map(), env, at }
  const depth = visit(parsed.expr, new Set(), walk)
  if (depth > MAX_COMPREHENSION_DEPTH)
    throw at(parsed.expr.id, `comprehensions nest deeper than ${MAX_COMPREHENSION_DEPTH}`)
  return { parsed, nodes: walk.nodes, depth, patterns: walk.patterns }
}

/** Checks one node and below; returns the comprehension nesting depth of the subtree. */
function visit(e: CelExpr, bound: ReadonlySet<string>, w: Walk): number {
  if (++w.nodes > MAX_CONDITION_NODES)
    throw w.at(e.id, `more than ${MAX_CONDITION_NODES} expression nodes`)
  const k = e.exprKind
  switch (k.case) {
    case 'constExpr':
      return 0
    case 'identExpr':
      if (!bound.has(k.value.name) && w.env.variables.find(k.value.name) === undefined)
        throw w.at(e.id, `undeclared reference to "${k.value.name}"`)
      return 0
    case 'selectExpr':
      return k.value.operand === undefined ? 0 : visit(k.value.operand, bound, w)
    case 'callExpr': {
      const call = k.value
      checkFunction(e, call.function, call.target !== undefined, call.args.length, w)
      const pattern = call.args[0]?.exprKind
      if (call.function === 'matches' && pattern?.case === 'constExpr') {
        const lit = pattern.value.constantKind
        if (lit.case === 'stringValue') compilePattern(lit.value, call.args[0] as CelExpr, w)
      }
      let d = call.target === undefined ? 0 : visit(call.target, bound, w)
      for (const a of call.args) d = Math.max(d, visit(a, bound, w))
      return d
    }
    case 'listExpr':
      return Math.max(0, ...k.value.elements.map((x) => visit(x, bound, w)))
    case 'structExpr': {
      // SECURITY: no protobuf messages: a condition reads JSON, and builds maps at most.
      if (k.value.messageName !== '') throw w.at(e.id, `no message types: ${k.value.messageName}`)
      let d = 0
      for (const entry of k.value.entries) {
        if (entry.keyKind.case === 'mapKey') d = Math.max(d, visit(entry.keyKind.value, bound, w))
        if (entry.value !== undefined) d = Math.max(d, visit(entry.value, bound, w))
      }
      return d
    }
    case 'comprehensionExpr': {
      const c = k.value
      const inner = new Set([...bound, c.iterVar, c.accuVar, ...(c.iterVar2 ? [c.iterVar2] : [])])
      const outer = Math.max(
        c.iterRange === undefined ? 0 : visit(c.iterRange, bound, w),
        c.accuInit === undefined ? 0 : visit(c.accuInit, new Set([...bound]), w),
      )
      let loop = 0
      for (const part of [c.loopCondition, c.loopStep])
        if (part !== undefined) loop = Math.max(loop, visit(part, inner, w))
      const result = c.result === undefined ? 0 : visit(c.result, new Set([...bound, c.accuVar]), w)
      return Math.max(outer, 1 + loop, result)
    }
    default:
      throw w.at(e.id, 'an expression form conditions do not support')
  }
}

/** Operators (`_==_`, `!_`, `@in`) come from the parser; named functions must exist in std. */
function checkFunction(e: CelExpr, name: string, method: boolean, arity: number, w: Walk): void {
  if (/^[_!@]/.test(name)) return
  const group = w.env.funcs.find(name)
  const fits =
    group !== undefined &&
    [...group].some((f) => (f.target !== undefined) === method && f.arguments.length === arity)
  if (!fits)
    throw w.at(e.id, `no function ${method ? `.${name}` : name} taking ${arity} argument(s)`)
}

function compilePattern(pattern: string, e: CelExpr, w: Walk): void {
  if (w.patterns.has(pattern)) return
  try {
    w.patterns.set(pattern, RE2JS.compile(pattern))
  } catch (err) {
    throw w.at(e.id, `invalid RE2 pattern ${JSON.stringify(pattern)}: ${(err as Error).message}`)
  }
}
