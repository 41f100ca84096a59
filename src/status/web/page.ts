import { lineChart } from './chart.js'
import { configuration } from './config-panel.js'
import { count, duration, empty, formatRate, ms } from './format.js'
import { html, type Html } from './html.js'
import { cache, catalog, list, policy, rateLimits } from './panels.js'
import type { StatusDocument, ToolTable } from '../model.js'
import { CAUSE_TEXT, CAUSES, causeOf, type Cause } from '../outcomes.js'
import type { ReplicaReport } from '../report.js'
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
    ${rateLimits(doc)} ${policy(doc)} ${catalog(doc)} ${configuration(doc)}
    <p class="footnote">
      Generated ${doc.generatedAt}. The same data: <a href="status.json">status.json</a>.
    </p>
  </main>`
}

function gateway(doc: StatusDocument): Html {
  const g = doc.gateway
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
      <dd data-field="reload">${reload(doc)}</dd>
    </dl>
    ${list('Warnings', g.warnings, 'warnings')}
  </section>`
}

/**
 * The last reload, and whether the files on disk still differ from what runs: a refusal whose
 * edit was undone is resolved (nothing reloads when the files match the running config).
 */
function reload(doc: StatusDocument): Html | string {
  const r = doc.gateway.lastReload
  if (r === null) return 'none since start'
  const changed = r.changed === null ? '' : html` (${r.changed})`
  if (r.outcome === 'applied')
    return html`<span class="good" data-outcome="applied">applied</span> at ${r.at}${changed}`
  if (r.resolvedAt !== null)
    return html`<span data-outcome="resolved">resolved</span> at ${r.resolvedAt}: the files on disk
      match the running config again <small>(a reload was refused at ${r.at})</small>`
  return html`<span class="bad" data-outcome="refused">refused</span> at ${r.at}: the files on disk
    differ from the running config, which keeps serving until they are fixed
    <ul class="problems">
      ${r.problems.map((p) => html`<li>${p}</li>`)}
    </ul>`
}

function charts(doc: StatusDocument): Html {
  const end = Date.parse(doc.generatedAt)
  const span = doc.history.windowSeconds * 1000
  const series = doc.history.servers
  const rate = lineChart('Requests per second', series, (p) => p.rps, {
    end,
    spanMs: span,
    ratio: false,
  })
  const hits =
    doc.cache === null
      ? ''
      : lineChart('Cache hit ratio (of what could be cached)', series, (p) => p.hitRatio, {
          end,
          spanMs: span,
          ratio: true,
        })
  return html`<section id="charts">
    <h2>Last ${Math.round(span / 60_000)} minutes</h2>
    <div class="charts">${rate} ${hits}</div>
  </section>`
}

function servers(doc: StatusDocument): Html {
  return html`<section id="servers">
    <h2>Servers</h2>
    ${doc.servers.map((s) => {
      const configured = doc.configuration.servers.find((c) => c.name === s.name)
      const checked = configured?.healthCheck !== null
      return html`<article class="server" data-server="${s.name}">
        <h3>
          ${s.name}
          <small
            >${count(s.replicas.length, 'replica')}${
              configured === undefined ? '' : html`, ${configured.balance}`
            }</small
          >
        </h3>
        ${traffic(s.traffic)}
        <table class="replicas">
          <thead>
            <tr>
              <th>Replica</th>
              <th>Address</th>
              <th>State</th>
              <th>Why</th>
              <th class="num">In flight</th>
              <th class="num">Streams</th>
              <th>Last health check</th>
            </tr>
          </thead>
          <tbody>
            ${s.replicas.map((r) => replica(r, checked))}
          </tbody>
        </table>
        ${tools(s.tools)}
      </article>`
    })}
  </section>`
}

function replica(r: ReplicaReport, checked: boolean): Html {
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
      ${
        check !== null
          ? html`${check.at}
              <span class="${check.ok ? 'good' : 'bad'}"
                >${check.ok ? 'passed' : `failed: ${check.reason ?? ''}`}</span
              >`
          : checked
            ? 'none yet'
            : html`<span class="muted"
                >no active checks (<code>healthCheck</code> not set): judged by its traffic</span
              >`
      }
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
          ${traffic(v.traffic)}${tools(v.tools)}${list('Names it cannot expose', v.problems, 'problems')}
        </article>`,
    )}
  </section>`
}

const CAUSE_HEAD: Readonly<Record<Cause, string>> = {
  ok: 'OK',
  cache: 'From cache',
  denied: 'Denied',
  limited: 'Limited',
  refused: 'Refused',
  backend: 'Backend error',
  failed: 'Failed',
}

/**
 * Requests over the last 1 and 5 minutes, by cause (outcomes.ts): the causes add up to the
 * requests. Each cause's cell names its outcomes on hover, and the line under the table names
 * them all.
 */
function traffic(t: Readonly<Record<'1m' | '5m', TrafficWindow>>): Html {
  const row = (name: string, w: TrafficWindow): Html => {
    const by = (cause: Cause): string =>
      Object.entries(w.outcomeCounts)
        .filter(([o]) => causeOf(o) === cause)
        .map(([o, n]) => `${o} ${n}`)
        .join(', ')
    return html`<tr>
      <th>${name}</th>
      <td class="num" data-field="requests">${w.requests}</td>
      <td class="num">${formatRate(w.rps)}</td>
      ${CAUSES.map(
        (c) =>
          html`<td
            class="num${w.causes[c] > 0 && c !== 'ok' && c !== 'cache' ? ' warn' : ''}"
            data-cause="${c}"
            title="${by(c)}"
          >
            ${w.causes[c]}
          </td>`,
      )}
      <td class="num">${ms(w.p50Ms)}</td>
      <td class="num">${ms(w.p95Ms)}</td>
      <td class="num">${ms(w.p99Ms)}</td>
    </tr>`
  }
  const outcomes = Object.entries(t['5m'].outcomeCounts).sort((a, b) => b[1] - a[1])
  return html`<table class="traffic">
      <thead>
        <tr>
          <th>Window</th>
          <th class="num">Requests</th>
          <th class="num">Rate</th>
          ${CAUSES.map((c) => html`<th class="num" title="${CAUSE_TEXT[c]}">${CAUSE_HEAD[c]}</th>`)}
          <th class="num">p50</th>
          <th class="num">p95</th>
          <th class="num">p99</th>
        </tr>
      </thead>
      <tbody>
        ${row('last 1 min', t['1m'])}${row('last 5 min', t['5m'])}
      </tbody>
    </table>
    <p class="outcomes" data-field="outcomes">
      ${
        outcomes.length === 0
          ? 'No requests in the last 5 minutes.'
          : html`Outcomes, last 5 min:
            ${outcomes.map(([o, n]) => html`<span class="outcome ${causeOf(o)}">${o} ${n}</span> `)}`
      }
    </p>`
}

/** `tools/call` per tool over the tool window (model.ts ToolTable). */
function tools(t: ToolTable): Html {
  const minutes = Math.max(1, Math.round(t.seconds / 60))
  if (t.rows.length === 0)
    return html`<div class="tools">${empty(`No tool calls in the last ${minutes} min.`)}</div>`
  return html`<table class="tools">
    <caption>
      Errors: calls the gateway refused or that failed (a limit, a timeout, a backend's 5xx); a
      backend's own 4xx answers are in the server's Backend error column.
    </caption>
    <thead>
      <tr>
        <th>Tool, last ${minutes} min</th>
        <th class="num">Calls</th>
        <th class="num">Errors</th>
        <th class="num">Denied</th>
        <th class="num">p50</th>
        <th class="num">p95</th>
      </tr>
    </thead>
    <tbody>
      ${t.rows.map(
        (r) =>
          html`<tr data-tool="${r.tool}">
            <td>
              <code>${r.tool}</code>${
                r.tool === 'other'
                  ? html` <small>(names no tools/list through this gateway has shown)</small>`
                  : ''
              }
            </td>
            <td class="num" data-field="calls">${r.calls}</td>
            <td class="num" data-field="errors">${r.errors}</td>
            <td class="num" data-field="denials">${r.denials}</td>
            <td class="num">${ms(r.p50Ms)}</td>
            <td class="num">${ms(r.p95Ms)}</td>
          </tr>`,
      )}
    </tbody>
  </table>`
}
