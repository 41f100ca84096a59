import { describe, expect, it } from 'vitest'
import type { StatusDocument } from '../../../src/status/model.js'
import { html } from '../../../src/status/web/html.js'
import { renderMain, renderPage } from '../../../src/status/web/page.js'

const EVIL = '<img src=x onerror=alert(1)>"\'&'

const window = {
  seconds: 60,
  requests: 3,
  rps: 0.05,
  errorShare: 0.5,
  outcomes: { [EVIL]: 0.5 },
  p50Ms: 1,
  p95Ms: 2,
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
    lastReload: { at: 'x', outcome: 'refused', changed: null, problems: [EVIL] },
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
    },
  ],
  virtualServers: [
    { name: 'ws', members: ['app'], problems: [EVIL], traffic: { '1m': window, '5m': window } },
  ],
  cache: {
    entries: 1,
    bytes: 10,
    maxBytes: 100,
    sharedTier: { state: EVIL, reason: EVIL, workers: { [EVIL]: 1 } },
    events: { [EVIL]: 1 },
    hitRatio: { '1m': null, '5m': 0.5, total: 1 },
    byServerMethod: [{ server: 'app', method: EVIL, hits: 1, misses: 1, hitRatio: 0.5 }],
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
      instructions: 'drifted',
      omitted: 0,
    },
  ],
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
    expect(page.split(escapeHtml(EVIL)).length - 1).toBeGreaterThanOrEqual(20)
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
  it('renders the live part alone, as the event stream sends it', () => {
    const main = String(renderMain(doc))
    expect(main.startsWith('<main id="status"')).toBe(true)
    expect(main).not.toContain('<img')
    expect(main).toContain('data-replica="app#0" data-state="unhealthy"')
  })
})
