import { bytes, count, empty, span } from './format.js'
import { html, type Html } from './html.js'
import type { StatusDocument } from '../model.js'
import type { ServerView } from '../configured.js'

/**
 * The "configuration" section: what the running config sets up (status/configured.ts), so an
 * operator reads balancing, timeouts, retries, health checks, limits, rules and virtual-server
 * routing here rather than in the YAML; rules and limits with their counts since start.
 */
export function configuration(doc: StatusDocument): Html {
  const c = doc.configuration
  return html`<section id="configuration">
    <h2>Configuration</h2>
    <div class="config-servers">${c.servers.map(server)}</div>
    ${virtual(doc)} ${rules(doc)} ${limits(doc)}
    <dl class="facts">
      <dt>Cache</dt>
      <dd data-field="cache-config">
        ${
          c.cache === null
            ? 'off (no cache: block)'
            : `${bytes(c.cache.maxBytes)} in memory, entries up to ${bytes(c.cache.maxEntryBytes)}, ` +
              `fresh at most ${span(c.cache.maxTtlMs)}` +
              (c.cache.private ? ', private answers per caller' : '') +
              (c.cache.staleIfErrorMs > 0
                ? `, stale for ${span(c.cache.staleIfErrorMs)} on a backend's failure`
                : '') +
              (c.cache.shared ? ', shared tier in Redis' : '')
        }
      </dd>
      <dt>Limit counters</dt>
      <dd data-field="limit-store">
        ${
          c.rateLimits === null || (!c.rateLimits.redis && c.rateLimits.replicas === 1)
            ? 'in this process'
            : c.rateLimits.redis
              ? 'in Redis, shared by every instance'
              : `in this process, each holding 1/${c.rateLimits.replicas} of a limit`
        }
      </dd>
    </dl>
  </section>`
}

function server(s: ServerView): Html {
  const hc = s.healthCheck
  const weights = new Set(s.weights).size > 1 ? ` (weights ${s.weights.join(', ')})` : ''
  const access = [
    s.trustHeaders
      ? 'routing headers trusted (trustHeaders)'
      : 'routing headers checked against the body',
    s.legacyClients === 'allow' ? '2025-era clients served' : '2025-era clients refused',
    ...(s.requiredScopes.length > 0 ? [`scopes ${s.requiredScopes.join(' ')}`] : []),
    ...(s.clients === null ? [] : [`clients ${s.clients.join(', ')}`]),
    ...(s.tokenExchange ? ['token exchange'] : []),
    ...(s.curated > 0 ? [`${count(s.curated, 'curated definition')}`] : []),
  ]
  return html`<article class="config-server" data-server="${s.name}">
    <h3>${s.name}</h3>
    <dl class="facts">
      <dt>Replicas</dt>
      <dd data-field="replicas">${count(s.replicas, 'replica')}${weights}, ${s.balance}</dd>
      <dt>Timeouts</dt>
      <dd>
        connect ${span(s.timeouts.connectMs)}, response head ${span(s.timeouts.responseHeadersMs)},
        stream idle ${s.timeouts.streamIdleMs === 0 ? 'none' : span(s.timeouts.streamIdleMs)}
      </dd>
      <dt>Deadlines</dt>
      <dd data-field="deadlines">
        ${
          s.deadlines.length === 0
            ? 'none of their own (the response head timeout applies)'
            : s.deadlines
                .map(
                  (d) =>
                    `${d.kind === 'methods' ? '' : `${d.kind.slice(0, -1)} `}${d.name} ${span(d.ms)}`,
                )
                .join('; ')
        }
      </dd>
      <dt>Retries</dt>
      <dd>
        ${
          s.retry.attempts === 0
            ? 'none'
            : `${count(s.retry.attempts, 'more attempt')} for safe methods, budget ${s.retry.budgetPercent}%, backoff ${span(s.retry.backoffBaseMs)}` +
              (s.retry.perTryTimeoutMs === null ? '' : `, ${span(s.retry.perTryTimeoutMs)} per try`)
        }
      </dd>
      <dt>Health checks</dt>
      <dd data-field="health-check">
        ${
          hc === null
            ? 'none: replicas are judged by their traffic (ejection below)'
            : `every ${span(hc.intervalMs)}, timeout ${span(hc.timeoutMs)}; down after ${count(hc.unhealthyAfter, 'failure')}, up after ${count(hc.healthyAfter, 'success', 'successes')}`
        }
      </dd>
      <dt>Ejection</dt>
      <dd>
        after ${count(s.outlier.consecutiveFailures, 'failure')} in a row, for
        ${span(s.outlier.baseEjectionMs)} up to ${span(s.outlier.maxEjectionMs)}
      </dd>
      <dt>Capacity</dt>
      <dd>${s.maxInFlight} in flight, ${s.maxStreams} streams per replica</dd>
      ${
        s.routes.length === 0
          ? ''
          : html`<dt>Routes</dt>
              <dd>
                ${s.routes.map((r) => `${r.names.join('; ')} → ${count(r.replicas, 'replica')}`).join(' · ')}
              </dd>`
      }
      <dt>Requests</dt>
      <dd>${access.join('; ')}</dd>
    </dl>
  </article>`
}

function virtual(doc: StatusDocument): Html {
  const v = doc.configuration.virtualServers
  if (v.length === 0) return html``
  return html`<h3>Virtual servers</h3>
    <table class="config-virtual">
      <thead>
        <tr>
          <th>Virtual server</th>
          <th>Members</th>
          <th>Names</th>
          <th class="num">Fan-out deadline</th>
          <th>Resources routed</th>
        </tr>
      </thead>
      <tbody>
        ${v.map(
          (x) =>
            html`<tr data-server="${x.name}">
              <td>${x.name}</td>
              <td>${x.members.join(', ')}</td>
              <td>
                ${
                  x.prefix === 'always'
                    ? 'always <member>_<name>'
                    : x.prefix === 'never'
                      ? 'never prefixed (a shared name is unreachable)'
                      : 'prefixed on a collision'
                }
              </td>
              <td class="num">${span(x.fanOutTimeoutMs)}</td>
              <td>${x.resources.map((r) => `${r.pattern} → ${r.member}`).join(', ') || '—'}</td>
            </tr>`,
        )}
      </tbody>
    </table>`
}

function rules(doc: StatusDocument): Html {
  const p = doc.configuration.policies
  if (p === null) return html``
  return html`<h3>Rules <small>(${p.mode}; hits and denials since start)</small></h3>
    ${
      p.rules.length === 0
        ? empty('The policy files have no rules: everything is denied (default deny).')
        : html`<table class="config-rules">
            <thead>
              <tr>
                <th>Rule</th>
                <th>Servers</th>
                <th>Allows</th>
                <th>Denies</th>
                <th>Callers</th>
                <th>Condition</th>
                <th class="num">Hits</th>
                <th class="num">Denials</th>
              </tr>
            </thead>
            <tbody>
              ${p.rules.map(
                (r) =>
                  html`<tr data-rule="${r.name}">
                    <td>
                      ${r.name}${r.dryRun ? html` <small>(dry run)</small>` : ''}<br /><small
                        >${r.source}</small
                      >
                    </td>
                    <td>${r.servers.join(', ')}</td>
                    <td>${r.allow.join('; ')}</td>
                    <td>${r.deny.join('; ')}</td>
                    <td>${r.when ? 'some (when)' : 'everyone'}</td>
                    <td><code>${r.condition ?? ''}</code></td>
                    <td class="num" data-field="hits">${r.hits}</td>
                    <td class="num" data-field="denials">${r.denials}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }${p.omitted > 0 ? empty(`${p.omitted} more rules and limits are not listed.`) : ''}`
}

function limits(doc: StatusDocument): Html {
  const l = doc.configuration.policies?.limits ?? []
  if (l.length === 0) return html``
  return html`<h3>Limits</h3>
    <table class="config-limits">
      <thead>
        <tr>
          <th>Limit</th>
          <th>Servers</th>
          <th>Counts</th>
          <th>Keyed on</th>
          <th>Allows</th>
          <th class="num">Refused</th>
        </tr>
      </thead>
      <tbody>
        ${l.map(
          (x) =>
            html`<tr data-limit="${x.name}">
              <td>${x.name}<br /><small>${x.source}</small></td>
              <td>${x.servers.join(', ')}</td>
              <td>${x.counts.join('; ')}${x.when ? ' (some callers)' : ''}</td>
              <td>${x.key}</td>
              <td>
                ${
                  x.rate === null
                    ? `${x.concurrency ?? 0} at once`
                    : `${x.rate}, burst ${x.burst ?? ''}`
                }
              </td>
              <td class="num" data-field="refused">${x.refused}</td>
            </tr>`,
        )}
      </tbody>
    </table>`
}
