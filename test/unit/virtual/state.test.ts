import { describe, expect, it } from 'vitest'
import { fanOut } from '../../../src/virtual/fan-out.js'
import { VirtualState } from '../../../src/virtual/state.js'

/** A VirtualState on a clock the test moves; fanOutTimeoutMs 3000 (so a 3 s throttle). */
function stateAt() {
  const clock = { now: 0 }
  const state = new VirtualState(['a', 'b'], 'onCollision', 3000, () => clock.now)
  return { clock, state }
}

/** A refresh the test settles. */
function gate() {
  let settle!: (ok: boolean) => void
  const done = new Promise<void>((resolve, reject) => {
    settle = (ok) => (ok ? resolve() : reject(new Error('refused')))
  })
  return { done, settle }
}

describe('VirtualState.refresh: single flight, throttled whatever the outcome', () => {
  it('shares the running refresh; its failure reaches the starter only', async () => {
    const { state } = stateAt()
    const g = gate()
    let starts = 0
    const start = () => {
      starts++
      return g.done
    }
    const own = state.refresh('tools', start)
    const joined = [state.refresh('tools', start), state.refresh('tools', start)]
    expect(starts).toBe(1)
    g.settle(false)
    await expect(own).rejects.toThrow('refused')
    for (const j of joined) await expect(j).resolves.toBeUndefined()
    // Each kind has its own.
    expect(state.refresh('prompts', () => Promise.resolve())).toBeDefined()
  })

  it('refuses a new refresh until max(1 s, fanOutTimeoutMs) after the last one ended', async () => {
    const { clock, state } = stateAt()
    for (const ok of [true, false]) {
      const g = gate()
      clock.now += 10_000
      const run = state.refresh('tools', () => g.done)
      clock.now += 500 // the refresh took 500 ms
      g.settle(ok)
      await run?.catch(() => undefined)
      await Promise.resolve()
      clock.now += 2999
      expect(state.refresh('tools', () => Promise.resolve())).toBeUndefined()
      clock.now += 2
      const next = state.refresh('tools', () => Promise.resolve())
      expect(next).toBeDefined()
      await next
    }
  })
})

describe('fanOut with a deadline already passed', () => {
  it('asks nobody and reports every member as timed out', async () => {
    const deadline = AbortSignal.abort()
    let asked = 0
    const outcomes = await fanOut([0, 1], deadline, () => {
      asked++
      return Promise.resolve(1)
    })
    expect(asked).toBe(0)
    expect(outcomes).toEqual([
      { ok: false, error: undefined, timedOut: true },
      { ok: false, error: undefined, timedOut: true },
    ])
  })
})

describe('VirtualState parameter headers: per member, by its own tool names', () => {
  const tool = (name: string, header?: string) => ({
    name,
    inputSchema: {
      type: 'object',
      properties: { region: { type: 'string', ...(header && { 'x-mcp-header': header }) } },
    },
  })
  const region = (header: string) => [{ path: ['region'], header }]

  it('a first page restarts the member; later pages add and replace; members stay apart', () => {
    const { state } = stateAt()
    state.noteParams(0, [tool('get_alerts', 'Region'), tool('plain')], true)
    state.noteParams(1, [tool('get_alerts', 'Zone')], true)
    expect(state.paramsOf(0, 'get_alerts')).toEqual(region('Region'))
    expect(state.paramsOf(1, 'get_alerts')).toEqual(region('Zone'))
    expect(state.paramsOf(0, 'plain')).toEqual([])
    state.noteParams(0, [tool('lookup', 'Site'), tool('get_alerts')], false)
    expect(state.paramsOf(0, 'lookup')).toEqual(region('Site'))
    expect(state.paramsOf(0, 'get_alerts')).toEqual([])
    state.noteParams(0, [tool('other')], true)
    expect(state.paramsOf(0, 'lookup')).toEqual([])
    expect(state.paramsOf(1, 'get_alerts')).toEqual(region('Zone'))
  })

  it('skips items that are no tool; knows nothing of a member it does not have', () => {
    const { state } = stateAt()
    state.noteParams(0, [null, 'x', { inputSchema: tool('a', 'A').inputSchema }], true)
    state.noteParams(0, { tools: [] }, false)
    state.noteParams(5, [tool('a', 'A')], true)
    expect(state.paramsOf(0, 'a')).toEqual([])
    expect(state.paramsOf(5, 'a')).toEqual([])
  })
})
