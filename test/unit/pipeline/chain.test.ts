import { Hono, type Context } from 'hono'
import { describe, expect, it } from 'vitest'
import type { GatewayEnv } from '../../../src/pipeline/env.js'
import { chain, type Stage } from '../../../src/pipeline/chain.js'

/** hono's contract for a route's stages, as the pipeline relies on it, on the one-handler chain. */

const onError = (err: Error, c: Context<GatewayEnv>): Response => {
  c.set('outcome', `error:${err.message}`)
  return new Response(`failed: ${err.message}`, { status: 500 })
}

function appOf(stages: Stage[]): Hono<GatewayEnv> {
  const app = new Hono<GatewayEnv>()
  app.onError(onError)
  app.all('/x', chain(stages, onError))
  return app
}

const answer =
  (text: string): Stage =>
  (c) =>
    c.text(text)

describe('chain', () => {
  it('runs the stages in order, synchronous and async alike, and takes the last one’s answer', async () => {
    const seen: string[] = []
    const app = appOf([
      async (c, next) => {
        seen.push('a')
        await next()
        seen.push('a after')
      },
      (c, next) => {
        seen.push('b')
        return next()
      },
      async (c) => {
        seen.push('c')
        await Promise.resolve()
        return c.text('done')
      },
    ])
    const res = await app.request('/x')
    expect(await res.text()).toBe('done')
    expect(seen).toEqual(['a', 'b', 'c', 'a after'])
  })

  it('answers from a synchronous chain', async () => {
    const app = appOf([(c, next) => next(), answer('sync')])
    const res = await app.request('/x')
    expect(res.status).toBe(200)
    expect(await res.text()).toBe('sync')
  })

  it('stops at a stage that answers without calling next', async () => {
    let reached = false
    const app = appOf([
      (c) => c.text('early', 401),
      () => {
        reached = true
      },
    ])
    const res = await app.request('/x')
    expect(res.status).toBe(401)
    expect(reached).toBe(false)
  })

  for (const how of ['sync throw', 'async rejection'] as const) {
    it(`renders a ${how} below a stage, keeps it on c.error, and resolves next()`, async () => {
      let above: { error: string | undefined; status: number } | undefined
      const fault: Stage =
        how === 'sync throw'
          ? () => {
              throw new Error('boom')
            }
          : async () => {
              await Promise.resolve()
              throw new Error('boom')
            }
      const app = appOf([
        async (c, next) => {
          await next()
          above = { error: c.error?.message, status: c.res.status }
        },
        (c, next) => next(),
        fault,
      ])
      const res = await app.request('/x')
      expect(res.status).toBe(500)
      expect(await res.text()).toBe('failed: boom')
      expect(above).toEqual({ error: 'boom', status: 500 })
    })
  }

  it('keeps the error’s answer over a Response a stage above returns afterwards', async () => {
    const app = appOf([
      async (c, next) => {
        await next()
        return c.text('late', 200)
      },
      () => {
        throw new Error('first')
      },
    ])
    const res = await app.request('/x')
    expect(res.status).toBe(500)
    expect(await res.text()).toBe('failed: first')
  })

  it('renders an error a stage throws after next() at that stage', async () => {
    const app = appOf([
      async (c, next) => {
        await next()
        throw new Error('after')
      },
      answer('fine'),
    ])
    const res = await app.request('/x')
    expect(res.status).toBe(500)
    expect(await res.text()).toBe('failed: after')
  })

  it('gives next() of the last stage nothing to run, and hono its not-found answer', async () => {
    const app = appOf([(c, next) => next()])
    const res = await app.request('/x')
    expect(res.status).toBe(404)
  })

  it('refuses an empty route', () => {
    expect(() => chain([], onError)).toThrow(/at least one stage/)
  })
})
