import pino from 'pino'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { configSchema } from '../../../src/config/schema.js'
import { ServerBalancing } from '../../../src/upstream/balancing.js'
import {
  ReplicaHealth,
  type CheckThresholds,
  type HealthEvent,
  type OutlierSettings,
} from '../../../src/upstream/health.js'
import { Lifecycle } from '../../../src/upstream/lifecycle.js'

// Fake timers move Date.now() too, so ejection periods are read off the clock, never waited for.
beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-11-30T12:00:00Z') })
})
afterEach(() => {
  vi.useRealTimers()
})

const OUTLIER: OutlierSettings = {
  consecutiveFailures: 3,
  baseEjectionMs: 1000,
  maxEjectionMs: 3500,
}
const CHECKS: CheckThresholds = { unhealthyAfter: 3, healthyAfter: 2 }

function health(canEject: () => boolean = () => true, outlier = OUTLIER) {
  const events: HealthEvent[] = []
  const h = new ReplicaHealth('app#0', outlier, CHECKS, canEject, (_h, e) => events.push(e))
  return { h, events }
}

/** Ejects `h` with `consecutiveFailures` failures in a row; returns the ejection's length. */
function eject(h: ReplicaHealth): number {
  for (let i = 0; i < OUTLIER.consecutiveFailures; i++) h.failed('reset')
  expect(h.ejected).toBe(true)
  return h.ejectedUntil - Date.now()
}

describe('ReplicaHealth: active-check hysteresis (down after 3 failed checks, up after 2 passed)', () => {
  // F = check failed, P = check passed; `down` is the state after the whole run.
  it.each<[string, string, boolean, readonly HealthEvent[]]>([
    ['two failures are not enough', 'FF', false, []],
    ['three failures in a row', 'FFF', true, ['down']],
    ['a pass in between starts the count over', 'FFPFF', false, []],
    ['… and the third failure after it counts', 'FFPFFF', true, ['down']],
    ['more failures once down report nothing new', 'FFFFFF', true, ['down']],
    ['one pass does not bring it back', 'FFFP', true, ['down']],
    ['two passes do', 'FFFPP', false, ['down', 'up']],
    ['a failure between the passes starts the count over', 'FFFPFP', true, ['down']],
    ['… and two passes after it', 'FFFPFPP', false, ['down', 'up']],
    ['passes while up report nothing', 'PPPP', false, []],
    ['down, up and down again', 'FFFPPFFF', true, ['down', 'up', 'down']],
  ])('%s: %s', (_label, run, down, events) => {
    const r = health()
    for (const c of run) {
      if (c === 'F') r.h.checkFailed('status 500')
      else r.h.checkPassed()
    }
    expect(r.h.down).toBe(down)
    expect(r.events).toEqual(events)
  })

  it('reports the latest failure while down (what /readyz shows)', () => {
    const { h } = health()
    for (const why of ['status 500', 'status 500', 'status 503', 'timeout']) h.checkFailed(why)
    expect(h.out()).toEqual({
      upstream: 'app#0',
      state: 'down',
      reason: 'health check failed: timeout',
    })
  })
})

describe('ReplicaHealth: passive ejection after consecutive failures', () => {
  // f = a request failed by the replica's fault, s = it answered.
  it.each<[string, string, boolean]>([
    ['two failures', 'ff', false],
    ['three in a row', 'fff', true],
    ['an answer in between starts over', 'ffsff', false],
    ['… and three after it', 'ffsfff', true],
    ['answers only', 'sss', false],
  ])('%s: %s', (_label, run, ejected) => {
    const r = health()
    for (const c of run) {
      if (c === 'f') r.h.failed('reset')
      else r.h.succeeded()
    }
    expect(r.h.ejected).toBe(ejected)
    expect(r.events).toEqual(ejected ? ['ejected'] : [])
  })

  it('stays out for exactly its period, then is readmitted by the timer', () => {
    const { h, events } = health()
    expect(eject(h)).toBe(1000)
    vi.advanceTimersByTime(999)
    expect(h.ejected).toBe(true)
    vi.advanceTimersByTime(1)
    expect(h.ejected).toBe(false)
    expect(events).toEqual(['ejected', 'readmitted'])
  })

  it('does not extend an ejection with failures counted while out', () => {
    const { h, events } = health()
    const until = (eject(h), h.ejectedUntil)
    for (let i = 0; i < 10; i++) h.failed('reset')
    expect(h.ejectedUntil).toBe(until)
    expect(events).toEqual(['ejected'])
  })

  it('ends an ejection when an active check passes (as Envoy does)', () => {
    const { h, events } = health()
    eject(h)
    h.checkPassed()
    expect(h.ejected).toBe(false)
    expect(events).toEqual(['ejected', 'readmitted'])
    vi.advanceTimersByTime(5000) // the old timer does not report a second readmission
    expect(events).toEqual(['ejected', 'readmitted'])
  })

  it('shows the ejection, its reason and its end in out()', () => {
    const { h } = health()
    h.failed('upstream_timeout')
    h.failed('upstream_timeout')
    h.failed('upstream_bad_response (502)')
    expect(h.out()).toEqual({
      upstream: 'app#0',
      state: 'ejected',
      reason: '3 consecutive failures, last: upstream_bad_response (502)',
      until: '2026-11-30T12:00:01.000Z',
    })
    h.down = true
    expect(h.out()?.state).toBe('down') // a replica both down and ejected shows as down
  })
})

describe('ReplicaHealth: ejection period grows ×n, capped, and decays', () => {
  it.each<[string, readonly number[], readonly number[]]>([
    // Gaps: time spent back in rotation before the next ejection (ms). Base 1000, max 3500.
    ['re-ejected at once: 1×, 2×, 3×, then the cap', [0, 0, 0, 0], [1000, 2000, 3000, 3500, 3500]],
    ['in for exactly the max: still counts up', [0, 3500], [1000, 2000, 3000]],
    ['in for longer than the max: starts over at 1×', [0, 3501], [1000, 2000, 1000]],
    ['decay after a capped period', [0, 0, 0, 10_000], [1000, 2000, 3000, 3500, 1000]],
  ])('%s', (_label, gaps, periods) => {
    const { h } = health()
    const seen: number[] = []
    periods.forEach((_, i) => {
      const ms = eject(h)
      seen.push(ms)
      vi.advanceTimersByTime(ms) // readmitted by the timer
      expect(h.ejected).toBe(false)
      if (i < gaps.length) vi.advanceTimersByTime(gaps[i] as number)
    })
    expect(seen).toEqual(periods)
  })
})

describe('ReplicaHealth: never ejects the last replica that could answer', () => {
  it('keeps a replica in when canEject says no, and retries the check on the next failure', () => {
    let allowed = false
    const { h, events } = health(() => allowed)
    for (let i = 0; i < 5; i++) h.failed('reset')
    expect(h.ejected).toBe(false)
    expect(events).toEqual([])
    allowed = true
    h.failed('reset')
    expect(h.ejected).toBe(true)
  })

  const log = pino({ level: 'silent' })

  function balancing(replicas: number): ServerBalancing {
    const cfg = configSchema.parse({
      servers: {
        app: {
          upstreams: Array.from({ length: replicas }, (_, i) => ({
            url: `http://127.0.0.1:${9100 + i}/mcp`,
          })),
          outlier: { consecutiveFailures: 1, baseEjectionMs: 1000, maxEjectionMs: 1000 },
        },
      },
    }).servers.app
    if (cfg === undefined) throw new Error('no server in the test config')
    const b = new ServerBalancing('app', cfg, [], {
      log,
      metrics: undefined,
      lifecycle: new Lifecycle(),
      sessionKey: Buffer.alloc(32),
    })
    return b
  }

  // Replica states before every replica fails once: '.' available, 'D' health-checked down.
  it.each<[string, string, string]>([
    ['one replica', '.', '.'],
    ['two replicas: the second stays', '..', 'E.'],
    ['three replicas: the last stays', '...', 'EE.'],
    ['one down: the only available one stays', 'D.', 'D.'],
    ['two down of four: one of the others stays', 'D..D', 'DE.D'],
  ])('%s', async (_label, before, after) => {
    const b = balancing(before.length)
    try {
      b.replicas.forEach((u, i) => {
        u.health.down = before[i] === 'D'
      })
      for (const u of b.replicas) u.health.failed('reset')
      const state = b.replicas.map((u) => (u.health.down ? 'D' : u.health.ejected ? 'E' : '.'))
      expect(state.join('')).toBe(after)
    } finally {
      await b.close()
    }
  })

  it('readmits by the timer, and the replica it spared can then be ejected', async () => {
    const b = balancing(2)
    try {
      const [a, c] = b.replicas
      a!.health.failed('reset')
      c!.health.failed('reset')
      expect([a!.health.ejected, c!.health.ejected]).toEqual([true, false])
      vi.advanceTimersByTime(1000)
      expect(a!.health.ejected).toBe(false)
      c!.health.failed('reset')
      expect(c!.health.ejected).toBe(true)
    } finally {
      await b.close()
    }
  })
})

describe('ReplicaHealth.mirror: state decided by the checker worker', () => {
  it.each<[string, boolean, boolean, readonly HealthEvent[]]>([
    ['up → down is reported', false, true, ['down']],
    ['down → up is reported', true, false, ['up']],
    ['down → down only updates the reason', true, true, []],
    ['up → up reports nothing', false, false, []],
  ])('%s', (_label, from, to, events) => {
    const r = health()
    r.h.down = from
    r.h.mirror(to, 'health check failed: status 500')
    expect(r.h.down).toBe(to)
    expect(r.events).toEqual(events)
    if (to) expect(r.h.downReason).toBe('health check failed: status 500')
  })
})
