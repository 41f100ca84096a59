import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

/**
 * Keeps the hot path honest (docs/design/hot-path.md): the functions every benched request runs
 * through build no web Request or Response, never call `fetch`, and create no closure that
 * captures nothing of the request (such a function can be built once, when the pipeline is).
 * ESLint already bans the `fetch`/`Response`/`Request` globals in src/upstream, src/pipeline and
 * src/cache; these checks add hono's Response builders, the files outside those folders, and the
 * closures, per function rather than per folder.
 */

const root = fileURLToPath(new URL('../../../', import.meta.url))

/**
 * The per-request functions a forwarded call or a cache hit runs (the bench's rows): the stage
 * functions app.ts composes, the Node listener, and the undici handler's callbacks. `allow` names
 * hono builders a function may still use off the benched path (a policy denial is answered by
 * `c.body`, never on a call the policy allows).
 */
const HOT: readonly { file: string; fns: readonly string[]; allow?: readonly string[] }[] = [
  { file: 'src/pipeline/node-response.ts', fns: ['listener', 'write', 'afterAnswer'] },
  { file: 'src/pipeline/chain.ts', fns: ['dispatch', 'fail', 'chained', 'settle'] },
  { file: 'src/pipeline/access-log.ts', fns: ['accessLog'] },
  { file: 'src/pipeline/front-door.ts', fns: ['frontDoor'] },
  { file: 'src/pipeline/authenticate.ts', fns: ['authenticate'] },
  { file: 'src/pipeline/read-request.ts', fns: ['readRequest'] },
  { file: 'src/pipeline/read-body.ts', fns: ['readBody', 'buffered'] },
  { file: 'src/pipeline/classify.ts', fns: ['classifyRequest'] },
  { file: 'src/pipeline/admit.ts', fns: ['admit', 'proceed'], allow: ['body'] },
  { file: 'src/endpoint/admit.ts', fns: ['admit'] },
  { file: 'src/endpoint/send.ts', fns: ['sendPlanned'] },
  { file: 'src/endpoint/endpoint.ts', fns: ['admit', 'send'] },
  { file: 'src/pipeline/edge-cache.ts', fns: ['edgeCache', 'serve'] },
  // An in-band answer (a task this caller does not own) is built with `c.body`, off the bench.
  { file: 'src/pipeline/proxy.ts', fns: ['proxy'], allow: ['body'] },
  { file: 'src/pipeline/endpoint-call.ts', fns: ['callOf'] },
  { file: 'src/endpoint/plan.ts', fns: ['planAttempt', 'transformOf'] },
  { file: 'src/endpoint/headers.ts', fns: ['forwardHeaders'] },
  { file: 'src/upstream/forward.ts', fns: ['forward'] },
  {
    file: 'src/upstream/proxy-handler.ts',
    fns: ['onRequestStart', 'onResponseStart', 'onResponseData', 'onResponseEnd', 'write'],
  },
  { file: 'src/upstream/response-head.ts', fns: ['relayedHeaders'] },
  { file: 'src/mcp/body-transform.ts', fns: ['bodyKind'] },
]

/** hono's Context methods that build a web Response. */
const HONO_BUILDERS = new Set(['body', 'json', 'text', 'html', 'newResponse', 'redirect'])

interface Finding {
  readonly fn: string
  readonly line: number
  readonly what: string
}

/** Every function (declaration, expression, method) named `name` in the source. */
function functionsNamed(
  sf: ts.SourceFile,
  names: ReadonlySet<string>,
): ts.FunctionLikeDeclaration[] {
  const out: ts.FunctionLikeDeclaration[] = []
  const visit = (node: ts.Node): void => {
    if (
      (ts.isFunctionDeclaration(node) ||
        ts.isFunctionExpression(node) ||
        ts.isMethodDeclaration(node)) &&
      node.name !== undefined &&
      ts.isIdentifier(node.name) &&
      names.has(node.name.text)
    )
      out.push(node)
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return out
}

/** Names declared directly in `fn`'s own scope chain below it: parameters and locals. */
function declaredIn(fn: ts.Node): Set<string> {
  const names = new Set<string>()
  const addBinding = (name: ts.BindingName): void => {
    if (ts.isIdentifier(name)) names.add(name.text)
    else for (const el of name.elements) if (!ts.isOmittedExpression(el)) addBinding(el.name)
  }
  const visit = (node: ts.Node): void => {
    if (ts.isParameter(node) || ts.isVariableDeclaration(node)) addBinding(node.name)
    if (ts.isFunctionDeclaration(node) && node.name !== undefined) names.add(node.name.text)
    ts.forEachChild(node, visit)
  }
  visit(fn)
  return names
}

/** Identifiers a nested function reads (a crude free-variable set: every identifier in it). */
function identifiersIn(node: ts.Node): Set<string> {
  const out = new Set<string>()
  const visit = (n: ts.Node): void => {
    if (ts.isIdentifier(n)) out.add(n.text)
    // `this` inside an arrow is the enclosing call's: a capture.
    if (n.kind === ts.SyntaxKind.ThisKeyword) out.add('this')
    ts.forEachChild(n, visit)
  }
  visit(node)
  return out
}

/** The hot-path findings in one source text, for the functions named. */
export function hotPathFindings(
  text: string,
  fns: readonly string[],
  allow: readonly string[] = [],
): Finding[] {
  const sf = ts.createSourceFile('x.ts', text, ts.ScriptTarget.ES2022, true)
  const findings: Finding[] = []
  const line = (n: ts.Node): number => sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1
  for (const fn of functionsNamed(sf, new Set(fns))) {
    const fnName = (fn.name as ts.Identifier).text
    const request = declaredIn(fn)
    // Methods read the handler's own state through `this`: a closure using it is per instance.
    if (ts.isMethodDeclaration(fn)) request.add('this')
    const visit = (node: ts.Node): void => {
      if (ts.isNewExpression(node) && ts.isIdentifier(node.expression)) {
        const ctor = node.expression.text
        if (ctor === 'Response' || ctor === 'Request')
          findings.push({ fn: fnName, line: line(node), what: `new ${ctor}` })
      }
      if (ts.isCallExpression(node)) {
        const callee = node.expression
        if (ts.isIdentifier(callee) && callee.text === 'fetch')
          findings.push({ fn: fnName, line: line(node), what: 'fetch()' })
        if (
          ts.isPropertyAccessExpression(callee) &&
          ts.isIdentifier(callee.expression) &&
          ((callee.expression.text === 'c' &&
            HONO_BUILDERS.has(callee.name.text) &&
            !allow.includes(callee.name.text)) ||
            callee.expression.text === 'Response')
        )
          findings.push({
            fn: fnName,
            line: line(node),
            what: `${callee.expression.text}.${callee.name.text}() builds a web Response`,
          })
      }
      if ((ts.isArrowFunction(node) || ts.isFunctionExpression(node)) && node !== fn) {
        const own = declaredIn(node)
        const captured = [...identifiersIn(node)].filter((n) => request.has(n) && !own.has(n))
        if (captured.length === 0)
          findings.push({
            fn: fnName,
            line: line(node),
            what: 'a closure built per request that captures nothing of it: build it once',
          })
      }
      ts.forEachChild(node, visit)
    }
    if (fn.body !== undefined) ts.forEachChild(fn.body, visit)
  }
  return findings
}

describe('hot-path guard: the checker', () => {
  it('finds a web Response, a Request, fetch and hono builders', () => {
    const bad = `
      export const s = () => async function stage(c, next) {
        const r = new Response('x')
        await fetch('http://x')
        const q = new Request('http://x')
        if (c) return c.json({})
        return Response.json({})
      }`
    const what = hotPathFindings(bad, ['stage']).map((f) => f.what)
    expect(what).toEqual([
      'new Response',
      'fetch()',
      'new Request',
      'c.json() builds a web Response',
      'Response.json() builds a web Response',
    ])
  })

  it('finds a per-request closure that captures nothing, and accepts one that does', () => {
    const bad = `
      export const s = (log) => async function stage(c, next) {
        const id = c.get('id')
        const fixed = (x) => x + 1
        const uses = () => id
        const usesFactory = () => log
        return next(fixed, uses, usesFactory)
      }`
    const found = hotPathFindings(bad, ['stage'])
    // `fixed` captures nothing; `usesFactory` only the factory's argument: both could be built once.
    expect(found.map((f) => f.line)).toEqual([4, 6])
  })

  it('treats `this` as per-instance state in methods', () => {
    const text = `class H { onData(chunk) { this.x.forEach(() => this.y); [1].map((v) => v * 2) } }`
    const found = hotPathFindings(text, ['onData'])
    expect(found).toHaveLength(1)
    expect(found[0]?.what).toContain('captures nothing')
  })

  it('honours a per-function allowance', () => {
    const text = `const a = () => async function authorize(c) { return c.body(null, 202) }`
    expect(hotPathFindings(text, ['authorize'])).toHaveLength(1)
    expect(hotPathFindings(text, ['authorize'], ['body'])).toHaveLength(0)
  })
})

describe('hot-path guard: the code', () => {
  for (const { file, fns, allow } of HOT) {
    it(`${file}: ${fns.join(', ')}`, () => {
      const text = readFileSync(join(root, file), 'utf8')
      const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true)
      // A renamed function would silently escape the guard: every listed one must exist.
      const found = functionsNamed(sf, new Set(fns)).map((f) => (f.name as ts.Identifier).text)
      expect(new Set(found)).toEqual(new Set(fns))
      expect(hotPathFindings(text, fns, allow)).toEqual([])
    })
  }

  it('the gateway reaches hono through its own listener, not a web-Request adapter', () => {
    const server = readFileSync(join(root, 'src/server.ts'), 'utf8')
    expect(server).not.toMatch(/createAdaptorServer|getRequestListener|from '@hono\/node-server'/)
    expect(server).toMatch(/nodeListener\(/)
  })
})
