import { pino } from 'pino'
import { describe, expect, it, onTestFinished } from 'vitest'
import { parseConfigText } from '../../../src/runtime/load.js'
import { createMetrics } from '../../../src/observability/metrics.js'
import { ServerBalancing } from '../../../src/upstream/balancing.js'
import type { HealthShare } from '../../../src/upstream/health-share.js'
import { Lifecycle } from '../../../src/upstream/lifecycle.js'
import { startReplica } from '../../helpers/replicas.js'

interface Published {
  server: string
  url: string
  down: boolean
  reason: string
}

/** A server `app` over the given replica URLs, with active checks every 50 ms. */
function balancing(urls: readonly string[], health: HealthShare): ServerBalancing {
  const upstreams = urls.map((url) => `{ url: "${url}" }`).join(', ')
  const { config } = parseConfigText(
    `servers:\n  app:\n    upstreams: [${upstreams}]\n    healthCheck: { intervalMs: 50, timeoutMs: 500, unhealthyAfter: 1, healthyAfter: 1 }\n`,
    { dir: '.' },
  )
  const metrics = createMetrics(false)
  const b = new ServerBalancing('app', config.servers['app']!, [], {
    log: pino({ level: 'silent' }),
    metrics,
    lifecycle: new Lifecycle(),
    sessionKey: Buffer.alloc(32),
    health,
  })
  onTestFinished(() => b.close())
  return b
}

describe('health checks shared between workers (one checker)', () => {
  it('the checker probes and publishes every result with the replica URL', async () => {
    let healthy = true
    const r = await startReplica('r0', (c) =>
      c.method === 'server/discover' && !healthy ? { status: 500 } : 'ok',
    )
    const published: Published[] = []
    const b = balancing([r.url], {
      checker: true,
      publish: (server, url, down, reason) => void published.push({ server, url, down, reason }),
      known: () => undefined,
    })
    await expect.poll(() => published.length).toBeGreaterThanOrEqual(2)
    expect(published[0]).toEqual({
      server: 'app',
      url: new URL(r.url).href,
      down: false,
      reason: '',
    })
    healthy = false
    await expect.poll(() => published.at(-1)?.down).toBe(true)
    expect(published.at(-1)?.reason).toBe('health check failed: status 500')
    expect(b.out()).toEqual([
      { upstream: 'app#0', state: 'down', reason: 'health check failed: status 500' },
    ])
  })

  it('another worker sends no probe, starts from the known state and follows what it is told', async () => {
    const r = await startReplica('r0')
    const other = await startReplica('r1')
    const href = new URL(r.url).href
    const b = balancing([r.url, other.url], {
      checker: false,
      publish: () => expect.fail('only the checker publishes'),
      known: (server, url) =>
        server === 'app' && url === href
          ? { down: true, reason: 'health check failed: status 500' }
          : undefined,
    })
    expect(b.out()).toEqual([
      { upstream: 'app#0', state: 'down', reason: 'health check failed: status 500' },
    ])
    b.mirror(href, false, '')
    expect(b.out()).toEqual([])
    b.mirror(new URL(other.url).href, true, 'health check failed: ECONNREFUSED')
    expect(b.out()).toEqual([
      { upstream: 'app#1', state: 'down', reason: 'health check failed: ECONNREFUSED' },
    ])
    b.mirror('http://127.0.0.1:1/mcp', true, 'not a replica of this server') // ignored
    expect(b.out()).toHaveLength(1)
    // The checker's probes would have arrived by now at the 50 ms interval.
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(r.count('server/discover') + other.count('server/discover')).toBe(0)
  })
})
