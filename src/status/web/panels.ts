import { bytes, empty, percent } from './format.js'
import { html, type Html } from './html.js'
import type { StatusDocument } from '../model.js'
import type { NameSets } from '../report.js'

/**
 * The page's panels below the servers: cache, rate limits, policy and catalog. A panel with
 * nothing to show says why in a sentence: nothing configured, or nothing happened yet.
 */

/** Why the cache did not keep an answer (cache/policy.ts UncacheableReason), as a reader says it. */
const NOT_CACHEABLE: Readonly<Record<string, string>> = {
  no_ttl: 'no ttlMs (or 0)',
  private: 'private (cacheScope)',
  error: 'an error',
  incomplete: 'input required',
  too_large: 'too large',
}

export function cache(doc: StatusDocument): Html {
  const c = doc.cache
  if (c === null)
    return html`<section id="cache">
      <h2>Cache</h2>
      ${empty(
        html`The edge cache is off: the config has no <code>cache:</code> block (docs/cache.md).`,
      )}
    </section>`
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
        <small>(hits over hits and misses; answers not cacheable are counted apart)</small>
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
    ${
      c.byServerMethod.length === 0
        ? empty('No cacheable request (lists, resources/read, server/discover) since start.')
        : html`<table class="cache">
            <thead>
              <tr>
                <th>Server</th>
                <th>Method</th>
                <th class="num">Hits</th>
                <th class="num">Misses</th>
                <th class="num">Not cacheable</th>
                <th>Why not</th>
                <th class="num">Hit ratio</th>
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
                    <td class="num" data-field="not-cacheable">${r.notCacheable}</td>
                    <td data-field="why-not">
                      ${Object.entries(r.notCacheableBy)
                        .map(([why, n]) => `${NOT_CACHEABLE[why] ?? why} ${n}`)
                        .join(', ')}
                    </td>
                    <td class="num">${percent(r.hitRatio)}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
  </section>`
}

export function policy(doc: StatusDocument): Html {
  const p = doc.policy
  if (p.policyId === null)
    return html`<section id="policy">
      <h2>Policy</h2>
      ${empty(
        html`No policies are configured (the config has no <code>policies:</code> folder): every
          tool, prompt and resource is allowed.`,
      )}
    </section>`
  return html`<section id="policy">
    <h2>Policy</h2>
    <p>Mode: <strong data-field="mode">${p.mode}</strong></p>
    ${
      p.byRule.length === 0
        ? empty('No denials since start.')
        : html`<table class="by-rule">
            <thead>
              <tr>
                <th>Rule</th>
                <th class="num">Denials</th>
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
          </table>`
    }
    ${
      p.denials.length === 0
        ? ''
        : html`<h3>Last ${p.denials.length} denials</h3>
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
                      <td class="rule">
                        ${d.rule}${d.dryRun ? html` <small>(dry run)</small>` : ''}
                      </td>
                      <td class="condition">${d.condition ?? ''}</td>
                      <td><code>${d.caller}</code></td>
                    </tr>`,
                )}
              </tbody>
            </table>`
    }
  </section>`
}

export function rateLimits(doc: StatusDocument): Html {
  const r = doc.rateLimits
  const configured = doc.configuration.policies?.limits ?? []
  if (configured.length === 0) {
    const why =
      doc.configuration.policies === null
        ? html`the config has no <code>policies:</code> folder, whose files hold them`
        : html`the policy files have no <code>limits:</code>`
    return html`<section id="rate-limits">
      <h2>Rate limits</h2>
      ${empty(html`No limits are configured: ${why} (docs/rate-limits.md).`)}
    </section>`
  }
  return html`<section id="rate-limits">
    <h2>Rate limits</h2>
    <table class="refused">
      <thead>
        <tr>
          <th>Limit</th>
          <th class="num">Refused (429)</th>
          <th class="num">Of those, table full</th>
        </tr>
      </thead>
      <tbody>
        ${configured.map((l) => {
          const refused = r.refused.find((x) => x.limit === l.name)
          return html`<tr data-limit="${l.name}">
            <td>${l.name}</td>
            <td class="num" data-field="refused">${refused?.refused ?? 0}</td>
            <td class="num">${refused?.tableFull ?? 0}</td>
          </tr>`
        })}
      </tbody>
    </table>
    <h3>Callers limited in the last minute</h3>
    ${
      r.limited.length === 0
        ? empty('No caller was refused in the last minute.')
        : html`<table class="limited">
            <thead>
              <tr>
                <th>Limit</th>
                <th>Keyed on</th>
                <th>Caller</th>
                <th class="num">Refused</th>
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
          </table>`
    }
  </section>`
}

export function catalog(doc: StatusDocument): Html {
  if (doc.catalog.length === 0)
    return html`<section id="catalog">
      <h2>Catalog</h2>
      ${empty(
        html`No server is pinned or curated (no <code>pinning:</code>, no
          <code>servers.&lt;name&gt;.tools</code> or <code>.prompts</code>; docs/catalog.md).`,
      )}
    </section>`
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
          <div class="kinds">
            ${kind('tools', c.tools)}${kind('prompts', c.prompts)}${
              hasSkills(c.skills) ? kind('skills', c.skills) : ''
            }
          </div>
        </article>`,
    )}
  </section>`
}

/** Skills get a column only where there are any: most servers serve none. */
const hasSkills = (s: NameSets): boolean =>
  s.pinned.length + s.drifted.length + s.new.length + s.hidden.length > 0

export function list(title: string, items: readonly string[], id: string): Html {
  if (items.length === 0) return html``
  return html`<div class="${id}">
    <h3>${title}</h3>
    <ul>
      ${items.map((w) => html`<li>${w}</li>`)}
    </ul>
  </div>`
}
