import { lineChart, formatRate } from './chart.js'
import { html, type Html } from './html.js'
import type { StatusDocument } from '../model.js'
import type { NameSets, ReplicaReport } from '../report.js'
import type { TrafficWindow } from '../windows.js'

/**
 * The status page, rendered on the server from the same document as status.json: it works with
 * JavaScript off (the snapshot it was served with); with it on, status.js swaps in the `<main>`
 * the event stream sends every few seconds (renderMain), so there is one renderer.
 */
export function renderPage(doc: StatusDocument, opts: { readonly signOut: boolean }): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="no-referrer" />
        <title>mcp-edge status</title>
        <link rel="icon" href="favicon.svg" type="image/svg+xml" />
        <link rel="stylesheet" href="status.css" />
        <script src="status.js" defer></script>
      </head>
      <body>
        <header>
          <h1>mcp-edge</h1>
          <span class="version">${doc.gateway.version}</span>
          <span
            id="live"
            class="live"
            title="Figures of the moment this page was served; with JavaScript they update live"
            >snapshot</span
          >
          ${
            opts.signOut
              ? html`<form class="sign-out" method="post" action="logout">
                  <button type="submit">Sign out</button>
                </form>`
              : ''
          }
        </header>
        ${renderMain(doc)}
      </body>
    </html> `
}

/** The part of the page that is replaced live. */
export function renderMain(doc: StatusDocument): Html {
  return html`<main id="status" data-generated="${doc.generatedAt}">
    ${gateway(doc)} ${charts(doc)} ${servers(doc)} ${virtualServers(doc)} ${cache(doc)}
    ${rateLimits(doc)} ${policy(doc)} ${catalog(doc)}
    <p class="footnote">
      Generated ${doc.generatedAt}. The same data: <a href="status.json">status.json</a>.
    </p>
  </main>`
}

function gateway(doc: StatusDocument): Html {
  const g = doc.gateway
  const r = g.lastReload
  return html`<section id="gateway">
    <h2>Gateway</h2>
    <dl class="facts">
      <dt>State</dt>
      <dd data-field="state" class="${g.draining ? 'bad' : 'good'}">
        ${g.draining ? 'draining' : 'serving'}
      </dd>
      <dt>Uptime</dt>
      <dd data-field="uptime">${duration(g.uptimeSeconds)} (since ${g.startedAt})</dd>
      <dt>Workers</dt>
      <dd data-field="workers">
        ${g.workers.reporting} of ${g.workers.configured}
        reporting${g.workers.pids.length > 0 ? html` (pid ${g.workers.pids.join(', ')})` : ''}
      </dd>
      <dt>Config</dt>
      <dd data-field="config">
        ${g.config.file ?? '(given in code)'}, digest <code>${g.config.digest}</code>, loaded
        ${g.config.loadedAt}${g.config.workersAgree ? '' : html` <span class="bad">workers run different configs</span>`}
      </dd>
      <dt>Policy</dt>
      <dd>
        ${g.config.policyId === null ? 'none' : html`<code>${g.config.policyId}</code>`},
        ${g.config.policyMode}
      </dd>
      <dt>Last reload</dt>
      <dd data-field="reload">
        ${
          r === null
            ? 'none since start'
            : html`<span
                  class="${r.outcome === 'applied' ? 'good' : 'bad'}"
                  data-outcome="${r.outcome}"
                  >${r.outcome}</span
                >
                at
                ${r.at}${r.changed === null ? '' : html` (${r.changed})`}${
                  r.problems.length > 0
                    ? html`<ul class="problems">
                        ${r.problems.map((p) => html`<li>${p}</li>`)}
                      </ul>`
                    : ''
                }`
        }
      </dd>
    </dl>
    ${list('Warnings', g.warnings, 'warnings')}
  </section>`
}

function charts(doc: StatusDocument): Html {
  const end = Date.parse(doc.generatedAt)
  const span = doc.history.windowSeconds * 1000
  const series = doc.history.servers
  return html`<section id="charts">
    <h2>Last ${Math.round(span / 60_000)} minutes</h2>
    <div class="charts">
      ${lineChart('Requests per second', series, (p) => p.rps, { end, spanMs: span, ratio: false })}
      ${doc.cache === null ? '' : lineChart('Cache hit ratio', series, (p) => p.hitRatio, { end, spanMs: span, ratio: true })}
    </div>
  </section>`
}

function servers(doc: StatusDocument): Html {
  if (doc.servers.length === 0) return html``
  return html`<section id="servers">
    <h2>Servers</h2>
    ${doc.servers.map(
      (s) =>
        html`<article class="server" data-server="${s.name}">
          <h3>${s.name}</h3>
          ${traffic(s.traffic)}
          <table class="replicas">
            <thead>
              <tr>
                <th>Replica</th>
                <th>Address</th>
                <th>State</th>
                <th>Why</th>
                <th>In flight</th>
                <th>Streams</th>
                <th>Last health check</th>
              </tr>
            </thead>
            <tbody>
              ${s.replicas.map(replica)}
            </tbody>
          </table>
        </article>`,
    )}
  </section>`
}

function replica(r: ReplicaReport): Html {
  const check = r.lastCheck
  return html`<tr data-replica="${r.id}" data-state="${r.state}">
    <td>${r.id}</td>
    <td><code>${r.address}</code></td>
    <td>
      <span class="state ${r.state}">${r.state}</span
      >${r.outInWorkers > 1 ? html` <small>(${r.outInWorkers} workers)</small>` : ''}
    </td>
    <td>${r.reason ?? ''}${r.until === null ? '' : html` <small>until ${r.until}</small>`}</td>
    <td class="num">${r.inFlight}</td>
    <td class="num">${r.streams}</td>
    <td>
      ${check === null ? '—' : html`${check.at} <span class="${check.ok ? 'good' : 'bad'}">${check.ok ? 'passed' : `failed: ${check.reason ?? ''}`}</span>`}
    </td>
  </tr>`
}

function virtualServers(doc: StatusDocument): Html {
  if (doc.virtualServers.length === 0) return html``
  return html`<section id="virtual-servers">
    <h2>Virtual servers</h2>
    ${doc.virtualServers.map(
      (v) =>
        html`<article class="server" data-server="${v.name}">
          <h3>${v.name} <small>over ${v.members.join(', ')}</small></h3>
          ${traffic(v.traffic)}${list('Names it cannot expose', v.problems, 'problems')}
        </article>`,
    )}
  </section>`
}

function traffic(t: Readonly<Record<'1m' | '5m', TrafficWindow>>): Html {
  const row = (name: string, w: TrafficWindow): Html => {
    const outcomes = Object.entries(w.outcomes).sort((a, b) => b[1] - a[1])
    return html`<tr>
      <th>${name}</th>
      <td class="num" data-field="requests">${w.requests}</td>
      <td class="num">${formatRate(w.rps)}</td>
      <td class="num">${percent(w.errorShare)}</td>
      <td class="num">${ms(w.p50Ms)}</td>
      <td class="num">${ms(w.p95Ms)}</td>
      <td>
        ${outcomes.length === 0 ? '—' : outcomes.map(([o, share]) => html`<span class="outcome">${o} ${percent(share)}</span> `)}
      </td>
    </tr>`
  }
  return html`<table class="traffic">
    <thead>
      <tr>
        <th>Window</th>
        <th>Requests</th>
        <th>Rate</th>
        <th>Errors</th>
        <th>p50</th>
        <th>p95</th>
        <th>Outcomes other than ok</th>
      </tr>
    </thead>
    <tbody>
      ${row('last 1 min', t['1m'])}${row('last 5 min', t['5m'])}
    </tbody>
  </table>`
}

function cache(doc: StatusDocument): Html {
  const c = doc.cache
  if (c === null) return html``
  const tier = c.sharedTier
  const events = Object.entries(c.events).sort((a, b) => a[0].localeCompare(b[0]))
  return html`<section id="cache">
    <h2>Cache</h2>
    <dl class="facts">
      <dt>Held</dt>
      <dd data-field="entries">${c.entries} entries, ${bytes(c.bytes)} of ${bytes(c.maxBytes)}</dd>
      <dt>Hit ratio</dt>
      <dd data-field="hit-ratio">
        ${percent(c.hitRatio['1m'])} last minute, ${percent(c.hitRatio['5m'])} last 5 minutes,
        ${percent(c.hitRatio.total)} since start
      </dd>
      <dt>Shared tier</dt>
      <dd data-field="shared-tier">
        ${
          tier === null
            ? 'not configured'
            : html`<span class="state ${tier.state}">${tier.state}</span
                >${tier.reason === undefined ? '' : ` (${tier.reason})`}${
                  Object.keys(tier.workers).length > 1
                    ? html` <small
                        >${Object.entries(tier.workers)
                          .map(([s, n]) => `${n} ${s}`)
                          .join(', ')}</small
                      >`
                    : ''
                }`
        }
      </dd>
      <dt>Events</dt>
      <dd>
        ${events.length === 0 ? 'none yet' : events.map(([e, n]) => html`<span class="outcome">${e} ${n}</span> `)}
      </dd>
    </dl>
    <table class="cache">
      <thead>
        <tr>
          <th>Server</th>
          <th>Method</th>
          <th>Hits</th>
          <th>Misses</th>
          <th>Hit ratio</th>
        </tr>
      </thead>
      <tbody>
        ${c.byServerMethod.map(
          (r) =>
            html`<tr data-server="${r.server}" data-method="${r.method}">
              <td>${r.server}</td>
              <td>${r.method}</td>
              <td class="num" data-field="hits">${r.hits}</td>
              <td class="num" data-field="misses">${r.misses}</td>
              <td class="num">${percent(r.hitRatio)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </section>`
}

function policy(doc: StatusDocument): Html {
  const p = doc.policy
  return html`<section id="policy">
    <h2>Policy</h2>
    <p>
      Mode:
      <strong data-field="mode">${p.mode}</strong
      >${p.policyId === null ? ' (no policies configured)' : ''}
    </p>
    <table class="by-rule">
      <thead>
        <tr>
          <th>Rule</th>
          <th>Denials</th>
        </tr>
      </thead>
      <tbody>
        ${p.byRule.map(
          (r) =>
            html`<tr data-rule="${r.rule}">
              <td>${r.rule}</td>
              <td class="num">${r.denials}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    <h3>Last ${p.denials.length} denials</h3>
    <table class="denials">
      <thead>
        <tr>
          <th>Time</th>
          <th>Server</th>
          <th>Method</th>
          <th>Target</th>
          <th>Rule</th>
          <th>Condition</th>
          <th>Caller</th>
        </tr>
      </thead>
      <tbody>
        ${p.denials.map(
          (d) =>
            html`<tr class="denial">
              <td>${d.at}</td>
              <td>${d.server}</td>
              <td>${d.method ?? ''}</td>
              <td class="target">${d.kind} <code>${d.target}</code></td>
              <td class="rule">${d.rule}${d.dryRun ? html` <small>(dry run)</small>` : ''}</td>
              <td class="condition">${d.condition ?? ''}</td>
              <td><code>${d.caller}</code></td>
            </tr>`,
        )}
      </tbody>
    </table>
  </section>`
}

function rateLimits(doc: StatusDocument): Html {
  const r = doc.rateLimits
  return html`<section id="rate-limits">
    <h2>Rate limits</h2>
    <table class="refused">
      <thead>
        <tr>
          <th>Limit</th>
          <th>Refused (429)</th>
          <th>Of those, table full</th>
        </tr>
      </thead>
      <tbody>
        ${r.refused.map(
          (l) =>
            html`<tr data-limit="${l.limit}">
              <td>${l.limit}</td>
              <td class="num" data-field="refused">${l.refused}</td>
              <td class="num">${l.tableFull}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    <h3>Callers limited in the last minute</h3>
    <table class="limited">
      <thead>
        <tr>
          <th>Limit</th>
          <th>Keyed on</th>
          <th>Caller</th>
          <th>Refused</th>
          <th>Last</th>
        </tr>
      </thead>
      <tbody>
        ${r.limited.map(
          (l) =>
            html`<tr>
              <td>${l.limit}</td>
              <td>${l.key}</td>
              <td><code>${l.caller}</code></td>
              <td class="num">${l.refused}</td>
              <td>${l.lastAt}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </section>`
}

function catalog(doc: StatusDocument): Html {
  if (doc.catalog.length === 0) return html``
  const names = (title: string, kind: string, set: readonly string[]): Html =>
    html`<details
      data-kind="${kind}"
      data-set="${title}"
      ${title === 'drifted' && set.length > 0 ? html` open` : ''}
    >
      <summary>${title} ${set.length}</summary>
      <ul class="names">
        ${set.map((n) => html`<li><code>${n}</code></li>`)}
      </ul>
    </details>`
  const kind = (label: string, s: NameSets): Html =>
    html`<div class="kind">
      <h4>${label}</h4>
      ${names('pinned', label, s.pinned)}${names('drifted', label, s.drifted)}${names('new', label, s.new)}${names('hidden', label, s.hidden)}
    </div>`
  return html`<section id="catalog">
    <h2>Catalog</h2>
    ${doc.catalog.map(
      (c) =>
        html`<article class="catalog" data-server="${c.server}">
          <h3>${c.server}</h3>
          <p>
            onDrift: ${c.onDrift ?? '—'}, newTools: ${c.newTools ?? '—'}, instructions:
            <span class="${c.instructions === 'drifted' ? 'bad' : ''}">${c.instructions}</span
            >${c.omitted > 0 ? html`, ${c.omitted} names not listed` : ''}
          </p>
          <div class="kinds">${kind('tools', c.tools)}${kind('prompts', c.prompts)}</div>
        </article>`,
    )}
  </section>`
}

function list(title: string, items: readonly string[], id: string): Html {
  if (items.length === 0) return html``
  return html`<div class="${id}">
    <h3>${title}</h3>
    <ul>
      ${items.map((w) => html`<li>${w}</li>`)}
    </ul>
  </div>`
}

function percent(share: number | null): string {
  return share === null ? '—' : `${(share * 100).toFixed(share > 0 && share < 0.01 ? 2 : 1)}%`
}

function ms(v: number | null): string {
  if (v === null) return '—'
  return v < 10 ? `${v.toFixed(2)} ms` : `${Math.round(v)} ms`
}

function bytes(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  return `${(n / 1024 / 1024).toFixed(1)} MiB`
}

function duration(seconds: number): string {
  const d = Math.floor(seconds / 86_400)
  const h = Math.floor((seconds % 86_400) / 3600)
  const m = Math.floor((seconds % 3600) / 60)
  const s = seconds % 60
  if (d > 0) return `${d} d ${h} h`
  if (h > 0) return `${h} h ${m} min`
  if (m > 0) return `${m} min ${s} s`
  return `${s} s`
}
