import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { parseConfigText } from '../../src/runtime/load.js'
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance-server.js'
import {
  NODE_RUNS_SUITE,
  runServerSuite,
  serverScenarios,
  type ScenarioResult,
} from '../helpers/conformance-suite.js'
import { oneServer, startTestGateway, type TestGateway } from '../helpers/gateway.js'

/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`), every server scenario,
 * straight at the reference server it is written against, then through the gateway: a server's
 * endpoint, that endpoint with an allowlist and the edge cache, and a virtual server over it. A
 * check the reference server passes must pass through the gateway. The suite speaks 2025-06-18 / 2025-11-25 (sessions, GET streams,
 * server-to-client requests), so this covers the gateway's 2025-era paths. The suite needs
 * Node ≥ 22: CI's Node 20 leg skips this file, its Node 24 leg (.ci/run) runs it, with the Node
 * that runs the tests. CONTRIBUTING.md §Conformance lists what runs and the expected differences.
 */

/** One run of the suite takes about 3 s (20 s through the virtual server); bound for loaded CI. */
const RUN_MS = 60_000
const TIMEOUT = { timeout: RUN_MS + 10_000 }

/**
 * The member's own deadline for `tools/call`. It bounds the calls a virtual server cannot complete
 * (below): without it they hang until the client gives up (the SDK's 60 s). Every call of the
 * reference server that completes takes well under 1 s.
 */
const CALL_DEADLINE_MS = 3_000

/** A scenario that differs on purpose through one front. */
interface Difference {
  readonly why: string
  /** Exactly these checks are lost, every other one kept; absent: the scenario fails. */
  readonly checks?: readonly string[]
}

// The scenario's "valid" request carries `Origin: http://127.0.0.1:<port>`, as a page served from
// the gateway's own loopback address would. The gateway answers 403 origin_not_allowed to every
// Origin that `origins:` does not list (empty by default: only clients that send no Origin, i.e.
// not browsers), so no web page drives a gateway that was not configured for it (spec 2025-11-25
// basic/transports §Security Warning; README §Configuration, `origins`). Its rebinding probe
// (Host and Origin of another name) is refused. The last test passes the whole scenario once
// `origins:` and `allowedHosts:` name the gateway's own origin.
const ORIGIN: Difference = {
  why: 'an Origin is refused unless `origins:` lists it, the gateway’s own included',
  // SECURITY: only this check; the rebinding probe must stay refused through every front.
  checks: ['localhost-host-valid-accepted'],
}

const NOT_RELAYED: Difference = {
  why: 'server-to-client requests of a 2025-only member are not relayed',
}
const NO_SUBSCRIBE: Difference = {
  why: '`resources/subscribe` and `resources/unsubscribe` are not offered to 2025-era clients',
}

/**
 * What differs on purpose, per front. Each entry must still differ exactly so: an entry that
 * passes is stale and fails the test.
 */
const EXPECTED_DIFFERENCES: Record<'server' | 'virtual', Readonly<Record<string, Difference>>> = {
  server: { 'dns-rebinding-protection': ORIGIN },
  // docs/virtual-servers.md §2025-era clients and §Not (yet) supported.
  virtual: {
    'dns-rebinding-protection': ORIGIN,
    // A 2025-only member's server-to-client request reaches the client in the call's stream, but
    // the answer the client posts back is not relayed to the member: the call ends at its deadline.
    'tools-call-sampling': NOT_RELAYED,
    'tools-call-elicitation': NOT_RELAYED,
    'elicitation-sep1034-defaults': NOT_RELAYED,
    'elicitation-sep1330-enums': NOT_RELAYED,
    'resources-subscribe': NO_SUBSCRIBE,
    'resources-unsubscribe': NO_SUBSCRIBE,
    // The merged list is one JSON answer (a server may answer a POST with JSON or SSE, spec
    // 2025-11-25 basic/transports §Sending Messages to the Server), so the three concurrent
    // tools/list requests get no SSE stream to read: the suite rates that INFO, not SUCCESS.
    'server-sse-multiple-streams': {
      why: 'a virtual server answers tools/list with JSON',
      checks: ['server-sse-streams-functional'],
    },
  },
}

/** Check ids a scenario succeeded with directly and not through the gateway. */
function lostChecks(direct: ScenarioResult, via: ScenarioResult | undefined): string[] {
  return [...direct.succeeded].filter((id) => via?.succeeded.has(id) !== true).sort()
}

/**
 * Asserts that `via` keeps every check of `direct`, but exactly the differences `expected` lists.
 * One message per scenario that does not match, with the suite's failure messages.
 */
function expectSameAsDirect(
  direct: ReadonlyMap<string, ScenarioResult>,
  via: ReadonlyMap<string, ScenarioResult>,
  expected: Readonly<Record<string, Difference>>,
): void {
  const problems: string[] = []
  for (const d of direct.values()) {
    const v = via.get(d.scenario)
    const lost = lostChecks(d, v)
    const e = expected[d.scenario]
    const said = `lost [${lost.join(', ')}]; ${(v?.failures ?? []).join('; ')}`
    if (e === undefined) {
      if (lost.length > 0) problems.push(`${d.scenario}: ${said}`)
    } else if (e.checks === undefined) {
      if (v?.passed !== false)
        problems.push(`${d.scenario} (${e.why}): passes now; remove it from the list`)
    } else if (lost.join() !== [...e.checks].sort().join()) {
      problems.push(
        `${d.scenario} (${e.why}): expected to lose only [${e.checks.join(', ')}], ${said}`,
      )
    }
  }
  expect(problems, 'differences from the direct run').toEqual([])
}

describe.skipIf(!NODE_RUNS_SUITE)('the MCP conformance suite through the gateway', () => {
  let backend: ConformanceServer
  let gw: TestGateway
  let scenarios: string[]
  let direct: Map<string, ScenarioResult>

  beforeAll(async () => {
    backend = await startConformanceServer()
    gw = await startTestGateway(
      {
        ...oneServer(backend.url, { timeouts: { methods: { 'tools/call': CALL_DEADLINE_MS } } }),
        virtualServers: { workspace: { members: ['app'] } },
      },
      { autoClose: false },
    )
    scenarios = await serverScenarios()
    direct = await runServerSuite(backend.url, scenarios, RUN_MS)
  }, RUN_MS + 10_000)
  afterAll(async () => {
    await gw?.close(200)
    await backend?.close()
  })

  it('passes every scenario straight at the reference server', () => {
    // The suite's own list decides what runs; a handful would mean it failed to load.
    expect(scenarios.length).toBeGreaterThanOrEqual(30)
    // A scenario a new suite version adds and the reference server fails needs the server extended.
    const failed = [...direct.values()].filter((r) => !r.passed)
    expect(failed.map((r) => `${r.scenario}: ${r.failures.join('; ')}`)).toEqual([])
  })

  it('keeps every check through a server endpoint', TIMEOUT, async () => {
    const before = backend.requests.length
    const via = await runServerSuite(gw.mcpUrl('app'), scenarios, RUN_MS)
    expectSameAsDirect(direct, via, EXPECTED_DIFFERENCES.server)
    expect(backend.requests.length - before).toBeGreaterThan(scenarios.length)
  })

  it(
    'keeps every check through a server endpoint with an allowlist and the edge cache',
    TIMEOUT,
    async () => {
      // The stages a plain config leaves out: policy (every named target judged, list answers
      // filtered and rewritten, JSON Schema keywords included) and the cache (list answers keyed,
      // stored and replayed with the request's id). The rule allows everything the server has.
      const dir = await mkdtemp(join(tmpdir(), 'mcp-edge-conformance-policies-'))
      onTestFinished(() => rm(dir, { recursive: true, force: true }))
      await writeFile(
        join(dir, 'all.yaml'),
        stringify({
          rules: [
            {
              name: 'everything',
              servers: ['app'],
              allow: { tools: ['*'], prompts: ['*'], resources: ['*'] },
            },
          ],
        }),
      )
      const guarded = await startTestGateway({
        ...oneServer(backend.url),
        policies: dir,
        cache: {},
      })
      const before = backend.requests.length
      const via = await runServerSuite(guarded.mcpUrl('app'), scenarios, RUN_MS)
      expectSameAsDirect(direct, via, EXPECTED_DIFFERENCES.server)
      expect(backend.requests.length - before).toBeGreaterThan(scenarios.length)
      // The allowlist judged the suite's calls (an audit line per named target).
      expect(guarded.logs.filter((l) => l['msg'] === 'policy allowed').length).toBeGreaterThan(10)
    },
  )

  it(
    'keeps every check through a virtual server, but what it does not offer',
    TIMEOUT,
    async () => {
      const before = backend.requests.length
      const via = await runServerSuite(gw.mcpUrl('workspace'), scenarios, RUN_MS)
      expectSameAsDirect(direct, via, EXPECTED_DIFFERENCES.virtual)
      expect(backend.requests.length - before).toBeGreaterThan(scenarios.length)
    },
  )

  it(
    'passes dns-rebinding-protection once origins and allowedHosts name the gateway',
    TIMEOUT,
    async () => {
      const own = await startTestGateway(oneServer(backend.url))
      // The port is known once the gateway listens: a reload names its own origin and Host.
      const host = `127.0.0.1:${own.port}`
      await own.reload(
        parseConfigText(
          stringify({
            listen: { host: '127.0.0.1', port: own.port },
            log: { level: 'info' },
            origins: [`http://${host}`],
            allowedHosts: [host],
            ...oneServer(backend.url),
          }),
          { dir: process.cwd(), env: {} },
        ),
      )
      const scenario = 'dns-rebinding-protection'
      const result = (await runServerSuite(own.mcpUrl('app'), [scenario], RUN_MS)).get(scenario)
      expect(result?.failures).toEqual([])
      expect([...(result?.succeeded ?? [])].sort()).toEqual([
        'localhost-host-rebinding-rejected',
        'localhost-host-valid-accepted',
      ])
    },
  )
})
