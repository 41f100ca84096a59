import { afterAll } from 'vitest'
import { ReplicaHealth } from '../../src/upstream/health.js'
import { Upstream } from '../../src/upstream/upstream.js'

const TIMEOUTS = { connectMs: 1000, responseHeadersMs: 1000, streamIdleMs: 1000 }
const OUTLIER = { consecutiveFailures: 5, baseEjectionMs: 1000, maxEjectionMs: 1000 }

/** What a replica is doing when a table row looks at it. */
export interface ReplicaState {
  /** Ordinary requests in flight. */
  readonly inFlight?: number
  readonly streams?: number
  readonly down?: boolean
  readonly ejected?: boolean
}

/**
 * A factory of replicas for unit tables: replica `i` has URL port 9000+i and id `app#i`, the given
 * caps (maxInFlight, maxStreams) and state; no connection is made. Their pools close after the file.
 */
export function replicaFactory(
  maxInFlight: number,
  maxStreams: number,
): (i: number, s?: ReplicaState) => Upstream {
  const made: Upstream[] = []
  afterAll(() => Promise.all(made.map((u) => u.destroy())))
  return (i, s = {}) => {
    const id = `app#${i}`
    const health = new ReplicaHealth(
      id,
      OUTLIER,
      { unhealthyAfter: 1, healthyAfter: 1 },
      () => true,
      () => {},
    )
    const u = new Upstream(
      id,
      new URL(`http://127.0.0.1:${9000 + i}/mcp`),
      TIMEOUTS,
      maxInFlight,
      maxStreams,
      health,
    )
    // inFlight counts every request on the replica, streams included (forward() counts them all).
    u.streams = s.streams ?? 0
    u.inFlight = (s.inFlight ?? 0) + u.streams
    health.down = s.down === true
    health.ejected = s.ejected === true
    made.push(u)
    return u
  }
}
