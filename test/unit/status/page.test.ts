import { describe, expect, it } from 'vitest'
import type { StatusDocument } from '../../../src/status/model.js'
import { lineChart } from '../../../src/status/web/chart.js'
import { html } from '../../../src/status/web/html.js'
import { renderMain, renderPage } from '../../../src/status/web/page.js'

const EVIL = '<img src=x onerror=alert(1)>"\'&'

const window = {
  seconds: 60,
  requests: 3,
  rps: 0.05,
  errorShare: 0.5,
  outcomes: { [EVIL]: 0.5 },
  causes: { ok: 1, cache: 0, denied: 0, limited: 0, refused: 2, backend: 0, failed: 0 },
  outcomeCounts: { ok: 1, [EVIL]: 2 },
  p50Ms: 1,
  p95Ms: 2,
  p99Ms: 3,
}
const tools = {
  seconds: 300,
  rows: [{ tool: EVIL, calls: 2, errors: 1, denials: 1, p50Ms: 1, p95Ms: 2 }],
}

/** A document in which every string a backend, a client or a policy author writes is hostile. */
const doc: StatusDocument = {
  schema: 1,
  generatedAt: '2026-12-01T00:00:00.000Z',
  gateway: {
    version: '0.1.0',
    startedAt: '2026-12-01T00:00:00.000Z',
    uptimeSeconds: 5,
    workers: { configured: 1, reporting: 1, pids: [1] },
    draining: false,
    config: {
      file: `/etc/${EVIL}.yaml`,
      digest: 'abc',
      policyId: EVIL,
      policyMode: 'enforce',
      loadedAt: '2026-12-01T00:00:00.000Z',
      workersAgree: true,
    },
    lastReload: { at: 'x', outcome: 'refused', changed: null, problems: [EVIL], resolvedAt: null },
    warnings: [EVIL],
  },
  servers: [
    {
      name: 'app',
      replicas: [
        {
          id: 'app#0',
          address: 'http://127.0.0.1:1/mcp',
          state: 'unhealthy',
          reason: EVIL,
          until: null,
          inFlight: 0,
          streams: 0,
          lastCheck: { at: 'x', ok: false, reason: EVIL },
          outInWorkers: 1,
        },
      ],
      traffic: { '1m': window, '5m': window },
      tools,
    },
  ],
  virtualServers: [
    {
      name: 'ws',
      members: ['app'],
      problems: [EVIL],
      traffic: { '1m': window, '5m': window },
      tools,
    },
  ],
  cache: {
    entries: 1,
    bytes: 10,
    maxBytes: 100,
    sharedTier: { state: EVIL, reason: EVIL, workers: { [EVIL]: 1 } },
    events: { [EVIL]: 1 },
    hitRatio: { '1m': null, '5m': 0.5, total: 1 },
    byServerMethod: [
      {
        server: 'app',
        method: EVIL,
        hits: 1,
        misses: 1,
        notCacheable: 1,
        notCacheableBy: { [EVIL]: 1 },
        hitRatio: 0.5,
      },
    ],
  },
  policy: {
    mode: 'enforce',
    policyId: EVIL,
    denials: [
      {
        at: 'x',
        server: 'app',
        method: EVIL,
        kind: 'tool',
        target: EVIL,
        rule: EVIL,
        reason: 'deny_rule',
        caller: EVIL,
        dryRun: true,
      },
    ],
    byRule: [{ rule: EVIL, denials: 1 }],
  },
  rateLimits: {
    refused: [{ limit: EVIL, refused: 1, tableFull: 0 }],
    limited: [{ limit: EVIL, key: EVIL, caller: EVIL, refused: 1, lastAt: 'x' }],
  },
  catalog: [
    {
      server: 'app',
      onDrift: 'hide',
      newTools: 'hide',
      tools: { pinned: [EVIL], drifted: [EVIL], new: [EVIL], hidden: [EVIL] },
      prompts: { pinned: [], drifted: [], new: [], hidden: [] },
      skills: { pinned: [EVIL], drifted: [EVIL], new: [], hidden: [] },
      instructions: 'drifted',
      omitted: 0,
    },
  ],
  configuration: {
    servers: [
      {
        name: 'app',
        replicas: 1,
        weights: [1],
        balance: EVIL,
        trustHeaders: false,
        legacyClients: 'allow',
        timeouts: { connectMs: 2000, responseHeadersMs: 30_000, streamIdleMs: 0 },
        deadlines: [{ kind: 'tools', name: EVIL, ms: 600_000 }],
        retry: { attempts: 1, budgetPercent: 20, backoffBaseMs: 25, perTryTimeoutMs: null },
        healthCheck: null,
        outlier: { consecutiveFailures: 5, baseEjectionMs: 30_000, maxEjectionMs: 300_000 },
        maxInFlight: 256,
        maxStreams: 256,
        routes: [{ names: [EVIL], replicas: 1 }],
        requiredScopes: [EVIL],
        clients: [EVIL],
        tokenExchange: false,
        curated: 1,
      },
    ],
    virtualServers: [
      {
        name: 'ws',
        members: ['app'],
        prefix: 'onCollision',
        fanOutTimeoutMs: 2000,
        resources: [{ pattern: EVIL, member: 'app' }],
      },
    ],
    policies: {
      mode: 'enforce',
      rules: [
        {
          name: EVIL,
          source: EVIL,
          servers: [EVIL],
          allow: [EVIL],
          deny: [EVIL],
          when: true,
          condition: EVIL,
          dryRun: false,
          hits: 3,
          denials: 1,
        },
      ],
      limits: [
        {
          name: EVIL,
          source: EVIL,
          servers: [EVIL],
          counts: [EVIL],
          key: EVIL,
          rate: EVIL,
          burst: 3,
          concurrency: null,
          when: false,
          refused: 1,
        },
      ],
      omitted: 0,
    },
    cache: null,
    rateLimits: null,
  },
  history: {
    sampleSeconds: 5,
    windowSeconds: 900,
    servers: [{ name: 'app', points: [{ at: '2026-11-30T23:59:55.000Z', rps: 1, hitRatio: 0.5 }] }],
  },
}

/** The five characters that end text or a quoted attribute, escaped as the page must. */
const escapeHtml = (text: string): string =>
  text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;')

describe('html``', () => {
  it('escapes every interpolation that is not Html, in text and in quoted attributes', () => {
    expect(escapeHtml(EVIL)).toBe('&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;')
    const bold = html`<b>ok</b>`
    const made = html`<p title="${EVIL}">${EVIL}${[EVIL, bold]}${null}${undefined}${false}${0}</p>`
    const evil = escapeHtml(EVIL)
    expect(String(made)).toBe(`<p title="${evil}">${evil}${evil}<b>ok</b>0</p>`)
    expect(String(html`${[html`<i>a</i>`, [html`${'<'}`, ',']]}`)).toBe('<i>a</i>&lt;,')
  })
})

describe('the page', () => {
  it('shows every backend, client and policy string as text, and carries no inline script or style', () => {
    const page = String(renderPage(doc, { signOut: false }))
    expect(page).not.toContain('<img')
    expect(page).not.toContain('onerror=alert(1)>')
    expect(page.split(escapeHtml(EVIL)).length - 1).toBeGreaterThanOrEqual(40)
    // The CSP allows no inline script or style: none is written (the hostile text aside).
    const markup = page.split(escapeHtml(EVIL)).join('')
    expect(markup).not.toMatch(/<script(?![^>]*\ssrc=)/)
    expect(markup).not.toMatch(/\sstyle=/)
    expect(markup).not.toMatch(/\son[a-z]+=/)
    expect(page).toContain('<script src="status.js" defer></script>')
  })
  it('offers sign-out when the listener has a token, outside the part replaced live', () => {
    const signedIn = String(renderPage(doc, { signOut: true }))
    expect(signedIn).toContain('<form class="sign-out" method="post" action="logout">')
    expect(signedIn.indexOf('action="logout"')).toBeLessThan(signedIn.indexOf('<main'))
    expect(String(renderPage(doc, { signOut: false }))).not.toContain('logout')
  })
  it("lists a server's skills in its catalog only when it has any", () => {
    const skills = (d: StatusDocument): number =>
      String(renderMain(d)).split('<h4>skills</h4>').length - 1
    expect(skills(doc)).toBe(1)
    const none = { pinned: [], drifted: [], new: [], hidden: [] }
    const noSkills = { ...doc, catalog: doc.catalog.map((c) => ({ ...c, skills: none })) }
    expect(skills(noSkills)).toBe(0)
  })
  it('renders the live part alone, as the event stream sends it', () => {
    const main = String(renderMain(doc))
    expect(main.startsWith('<main id="status"')).toBe(true)
    expect(main).not.toContain('<img')
    expect(main).toContain('data-replica="app#0" data-state="unhealthy"')
  })
})

describe('panels with nothing to show', () => {
  const bare: StatusDocument = {
    ...doc,
    cache: null,
    catalog: [],
    policy: { mode: 'enforce', policyId: null, denials: [], byRule: [] },
    rateLimits: { refused: [], limited: [] },
    configuration: { ...doc.configuration, policies: null },
    servers: doc.servers.map((x) => ({
      ...x,
      replicas: x.replicas.map((r) => ({ ...r, lastCheck: null })),
    })),
  }

  it('say why in a sentence: nothing configured', () => {
    const main = String(renderMain(bare))
    expect(main).toContain('The edge cache is off: the config has no <code>cache:</code> block')
    expect(main).toContain('No policies are configured')
    expect(main).toContain(
      'No limits are configured: the config has no <code>policies:</code> folder, whose files hold them',
    )
    expect(main).toContain('No server is pinned or curated')
    expect(main).toContain('no active checks (<code>healthCheck</code> not set)')
  })

  it('say why in a sentence: nothing happened yet', () => {
    const quiet: StatusDocument = {
      ...doc,
      policy: { ...doc.policy, denials: [], byRule: [] },
      rateLimits: { refused: [], limited: [] },
      servers: doc.servers.map((s) => ({ ...s, tools: { seconds: 300, rows: [] } })),
    }
    const main = String(renderMain(quiet))
    expect(main).toContain('No denials since start.')
    expect(main).toContain('No caller was refused in the last minute.')
    expect(main).toContain('No tool calls in the last 5 min.')
  })
})

describe('the charts', () => {
  const end = Date.parse('2026-12-01T00:15:00.000Z')
  const point = (at: string, hitRatio: number | null) => ({ at, rps: 1, hitRatio })
  it('draw a lone point as a visible dot and every point with its value on hover', () => {
    const svg = String(
      lineChart(
        'Cache hit ratio',
        [
          {
            name: 'weather',
            points: [
              point('2026-12-01T00:14:50.000Z', null),
              point('2026-12-01T00:14:55.000Z', 0.5),
              point('2026-12-01T00:15:00.000Z', null),
            ],
          },
          {
            name: 'docs',
            points: [point('2026-12-01T00:14:55.000Z', 1), point('2026-12-01T00:15:00.000Z', 0.25)],
          },
        ],
        (p) => p.hitRatio,
        { end, spanMs: 900_000, ratio: true },
      ),
    )
    // The lone value: no line can show it, so a visible dot does.
    expect(svg.match(/<circle\s+class="point s0 single"/g)).toHaveLength(1)
    expect(svg).toContain('<title>weather: 50% at 00:14:55 UTC</title>')
    // A run of two: a line, and a hover target with its value at each point.
    expect(svg.match(/<polyline/g)).toHaveLength(1)
    expect(svg.match(/<circle\s+class="point s1"/g)).toHaveLength(2)
    expect(svg).toContain('<title>docs: 25% at 00:15:00 UTC</title>')
  })
})
