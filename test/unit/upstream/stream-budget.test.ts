import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/errors.js'
import { Lifecycle } from '../../../src/upstream/lifecycle.js'
import { hasRoom, leaseStream, UpstreamPool } from '../../../src/upstream/pool.js'
import { replicaFactory, type ReplicaState as State } from '../../helpers/replica-fixtures.js'

/** A replica with maxInFlight 2 and maxStreams 2 in the given state. */
const replica = replicaFactory(2, 2)

function pick(states: readonly State[], stream: boolean): string {
  const members = states.map((s, i) => replica(i, s))
  const pool = new UpstreamPool(
    members,
    members.map(() => 1),
    'least-request',
  )
  try {
    return pool.select(undefined, undefined, stream).id
  } catch (err) {
    if (err instanceof GatewayError) return err.code
    throw err
  }
}

describe('UpstreamPool.select: streams and ordinary requests have separate budgets', () => {
  it.each<[string, readonly State[], boolean, string]>([
    ['streams never use up maxInFlight', [{ streams: 2 }], false, 'app#0'],
    ['ordinary requests at maxInFlight', [{ inFlight: 2 }], false, 'overloaded'],
    ['ordinary requests never use up maxStreams', [{ inFlight: 2 }], true, 'app#0'],
    ['a replica at maxStreams', [{ streams: 2 }], true, 'streams_at_capacity'],
    ['a stream goes to the replica with room', [{ streams: 2 }, { streams: 1 }], true, 'app#1'],
    ['a request goes to the replica with room', [{ inFlight: 2 }, { streams: 2 }], false, 'app#1'],
    ['every replica down', [{ down: true }, { down: true }], true, 'no_upstream'],
    ['panic: only ejected replicas left, with room', [{ ejected: true }], true, 'app#0'],
    [
      'panic: only ejected replicas left, full',
      [{ ejected: true, streams: 2 }],
      true,
      'streams_at_capacity',
    ],
  ])('%s', (_label, states, stream, want) => {
    expect(pick(states, stream)).toBe(want)
  })
})

describe('Lifecycle: per-caller stream counts', () => {
  it('refuses a caller past its cap with 429 too_many_streams, and only that caller', () => {
    const life = new Lifecycle()
    life.openStream('a', 2)
    life.openStream('a', 2)
    expect(() => life.openStream('a', 2)).toThrow(
      expect.objectContaining({ code: 'too_many_streams' }),
    )
    expect(life.openStream('b', 2).owner).toBe('b')
    expect(life.openStreams('a')).toBe(2)
    expect(life.openStreams()).toBe(3)
  })

  it('gives a slot back exactly once, however often the stream is closed', () => {
    const life = new Lifecycle()
    const first = life.openStream('a', 2)
    life.openStream('a', 2)
    life.closeStream(first)
    life.closeStream(first)
    expect(life.openStreams('a')).toBe(1)
    life.openStream('a', 2) // the slot came back once, not twice
    expect(() => life.openStream('a', 2)).toThrow(GatewayError)
  })

  it('stops streams on drain and still counts them until they are closed', async () => {
    const life = new Lifecycle()
    const before = life.openStream('a', 5)
    let stopped = 0
    before.onStop(() => stopped++)
    await life.drain(10)
    expect(stopped).toBe(1)
    const during = life.openStream('a', 5)
    expect(during.requested).toBe(true)
    expect(life.openStreams('a')).toBe(2)
    life.closeStream(before)
    life.closeStream(during)
    expect(life.openStreams()).toBe(0)
  })
})

describe('leaseStream: a stream the gateway holds open itself', () => {
  const replicaOf = replicaFactory(10, 2)

  it('counts against maxStreams like an attempt-loop stream, and gives the slot back once', () => {
    const u = replicaOf(7)
    const first = leaseStream(u)
    const second = leaseStream(u)
    expect([u.inFlight, u.streams]).toEqual([2, 2])
    // SECURITY: a third stream over maxStreams is refused, as the attempt loop refuses one.
    expect(() => leaseStream(u)).toThrow(expect.objectContaining({ code: 'streams_at_capacity' }))
    first()
    first()
    expect([u.inFlight, u.streams]).toEqual([1, 1])
    second()
    expect([u.inFlight, u.streams]).toEqual([0, 0])
    // Ordinary requests never lose their slots to held streams.
    expect(hasRoom(u, false)).toBe(true)
  })
})
