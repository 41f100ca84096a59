import type { Context, MiddlewareHandler, Next } from 'hono'
import type { GatewayEnv } from './env.js'

/**
 * A pipeline stage: hono's middleware signature, except that a stage which decides synchronously
 * may return its answer, or `next()`, without being an async function.
 */
export type Stage = (
  c: Context<GatewayEnv>,
  next: Next,
) => Response | void | Promise<Response | void>
type Outcome = Promise<void> | undefined

/** What `next()` returns when everything below has already finished. */
const DONE: Promise<void> = Promise.resolve()
const END = (): Promise<void> => DONE

/**
 * The stages of one route as one hono handler (docs/design/hot-path.md §Stages). hono composes a
 * route's handlers with an async dispatcher that awaits every stage, even one that finished
 * synchronously, and builds that composition anew per request; one handler per route takes hono's
 * single-handler path instead. The contract the stages rely on is hono's: a stage gets
 * `(c, next)`; an error thrown below a stage is rendered by `onError` at the stage that threw, is
 * kept on `c.error`, and `next()` resolves normally (the cache's stale-if-error reads it); a
 * returned Response becomes `c.res` unless one was already set (an error's always does).
 * What differs is cost only: a stage that answers or passes on synchronously (`return next()`)
 * adds no promise or await of its own.
 */
export function chain(
  stages: readonly Stage[],
  onError: (err: Error, c: Context<GatewayEnv>) => Response,
): MiddlewareHandler<GatewayEnv> {
  if (stages.length === 0) throw new Error('a route needs at least one stage')
  const last = stages.length - 1

  function dispatch(c: Context<GatewayEnv>, i: number): Outcome {
    let below: Promise<void> | undefined
    // Nothing follows the last stage (proxy, virtual): it answers, or the route has no answer.
    const next = i === last ? END : (): Promise<void> => (below = dispatch(c, i + 1) ?? DONE)
    let res: ReturnType<Stage>
    try {
      res = (stages[i] as Stage)(c, next)
    } catch (err) {
      return fail(c, err)
    }
    // `return next()`: what is below settles itself, nothing is left to do at this level.
    if (res === below) return below
    if (res instanceof Promise) {
      return res.then(
        (r) => settle(c, r),
        (err: unknown) => fail(c, err),
      )
    }
    settle(c, res)
    return undefined
  }

  function fail(c: Context<GatewayEnv>, err: unknown): undefined {
    // hono hands only Errors to onError; anything else is a bug to surface, as in hono.
    if (!(err instanceof Error)) throw err
    c.error = err
    c.res = onError(err, c)
    return undefined
  }

  // hono's single-handler path (hono-base.ts #dispatch) takes a returned Response as the answer,
  // or, from a promise, `c.res` once it is finalized; a chain that finished synchronously hands
  // over `c.res` itself. Typed as middleware for app.all(), which wants no synchronous answer.
  function chained(c: Context<GatewayEnv>): Promise<void> | Response | undefined {
    return dispatch(c, 0) ?? (c.finalized ? c.res : undefined)
  }
  return chained as MiddlewareHandler<GatewayEnv>
}

function settle(c: Context<GatewayEnv>, res: Response | void): void {
  if (res !== undefined && !c.finalized) c.res = res
}
