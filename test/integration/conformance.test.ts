import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfigText } from '../../src/runtime/load.js'
import { startConformanceServer } from '../helpers/conformance-server.js'
import {
  NODE_RUNS_SUITE,
  runServerSuite,
  serverScenarios,
  type ScenarioResult,
} from '../helpers/conformance-suite.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'

/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`), every server scenario,
 * once straight at the reference server it is written against and once through the gateway: a
 * scenario the server passes must pass through the gateway, check for check. The suite speaks
 * 2025-06-18 / 2025-11-25 (sessions, GET streams, server-to-client requests), so this covers the
 * gateway's 2025-era path. The suite needs Node ≥ 22, so CI's Node 20 leg skips this file and its
 * Node 24 leg (.ci/run) runs it, with the Node running the tests. CONTRIBUTING.md §Conformance.
 */

/** One whole run of the suite takes about 3 s; the bound is for a loaded CI machine. */
const RUN_MS = 40_000
const TIMEOUT = { timeout: 2 * RUN_MS + 10_000 }

/**
 * Scenarios the gateway fails on purpose, with the reason. Each one must still fail through the
 * gateway: an entry that passes is stale and fails the test.
 */
const EXPECTED_DIFFERENCES: Readonly<Record<string, string>> = {
  // The scenario's "valid" request carries `Origin: http://127.0.0.1:<port>`, as a page served from
  // the gateway's own loopback address would. The gateway answers 403 origin_not_allowed to every
  // Origin not in `origins:` (empty by default: only non-browser clients, which send none), so no
  // web page can drive a gateway it was not configured for (spec 2025-11-25 basic/transports
  // §Security Warning; docs/security.md). Its rebinding probe (Host and Origin of another name) is
  // refused either way; the second test passes the whole scenario once `origins:` and
  // `allowedHosts:` name the gateway's own origin.
  'dns-rebinding-protection':
    'an Origin is refused unless `origins:` lists it, the gateway’s own loopback origin included',
}

/** Check ids a scenario succeeded with directly and not through the gateway. */
function lostChecks(direct: ScenarioResult, via: ScenarioResult | undefined): string[] {
  return [...direct.succeeded].filter((id) => via?.succeeded.has(id) !== true)
}

function describeLost(
  lost: readonly string[],
  via: ReadonlyMap<string, ScenarioResult>,
  direct: ReadonlyMap<string, ScenarioResult>,
): string {
  return lost
    .map((name) => {
      const checks = lostChecks(direct.get(name) as ScenarioResult, via.get(name))
      const failures = via.get(name)?.failures ?? []
      return `${name}: lost ${checks.join(', ')}${failures.length > 0 ? `; ${failures.join('; ')}` : ''}`
    })
    .join('\n')
}

describe.skipIf(!NODE_RUNS_SUITE)('the MCP conformance suite through the gateway', () => {
  it(
    'passes through the gateway every scenario and check the reference server passes',
    TIMEOUT,
    async () => {
      const backend = await closing(startConformanceServer())
      const gw = await startTestGateway(oneServer(backend.url))
      const scenarios = await serverScenarios()
      // The suite's own list decides what runs; a handful would mean it failed to load.
      expect(scenarios.length).toBeGreaterThanOrEqual(30)

      const direct = await runServerSuite(backend.url, scenarios, RUN_MS)
      const failedDirect = [...direct.values()].filter((r) => !r.passed)
      // The reference server passes every scenario; a new scenario it fails needs it extended.
      expect(
        failedDirect.map((r) => `${r.scenario}: ${r.failures.join('; ')}`),
        'scenarios the reference server fails directly',
      ).toEqual([])

      const seenDirect = backend.requests.length
      const via = await runServerSuite(gw.mcpUrl('app'), scenarios, RUN_MS)
      const lost = scenarios.filter(
        (name) =>
          !(name in EXPECTED_DIFFERENCES) &&
          (via.get(name)?.passed !== true ||
            lostChecks(direct.get(name) as ScenarioResult, via.get(name)).length > 0),
      )
      expect(lost, `lost through the gateway:\n${describeLost(lost, via, direct)}`).toEqual([])
      const stale = Object.keys(EXPECTED_DIFFERENCES).filter(
        (name) => via.get(name)?.passed !== false,
      )
      expect(stale, 'expected differences that pass through the gateway: remove them').toEqual([])
      // The gateway forwarded the suite's traffic (a gateway answering by itself proves nothing).
      expect(backend.requests.length - seenDirect).toBeGreaterThan(scenarios.length)
    },
  )

  it(
    'passes dns-rebinding-protection once origins and allowedHosts name the gateway',
    TIMEOUT,
    async () => {
      const backend = await closing(startConformanceServer())
      const gw = await startTestGateway(oneServer(backend.url))
      // The port is known once the gateway listens: a reload names its own origin and Host.
      const own = `127.0.0.1:${gw.port}`
      await gw.reload(
        parseConfigText(
          stringify({
            listen: { host: '127.0.0.1', port: gw.port },
            log: { level: 'info' },
            origins: [`http://${own}`],
            allowedHosts: [own],
            ...oneServer(backend.url),
          }),
          { dir: process.cwd(), env: {} },
        ),
      )
      const scenario = 'dns-rebinding-protection'
      const result = (await runServerSuite(gw.mcpUrl('app'), [scenario], RUN_MS)).get(scenario)
      expect(result?.failures).toEqual([])
      expect([...(result?.succeeded ?? [])].sort()).toEqual([
        'localhost-host-rebinding-rejected',
        'localhost-host-valid-accepted',
      ])
    },
  )
})
