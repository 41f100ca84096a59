/**
 * The page's stylesheet and script, served as files from the admin listener (`status.css`,
 * `status.js`): the Content-Security-Policy allows no inline script or style. They are strings in
 * a module so that `tsc` carries them into dist/ like the rest of the gateway.
 */

/**
 * Live updates: the page subscribes to `status/events` (server-sent events) and swaps in each
 * `<main>` the server rendered (page.ts renderMain). The HTML is parsed inert (DOMParser runs no
 * script) and was escaped by the server; open `<details>` stay open across updates.
 */
export const STATUS_JS = `'use strict'
;(function () {
  var live = document.getElementById('live')
  function mark(text, on) {
    if (live === null) return
    live.textContent = text
    live.className = on ? 'live on' : 'live off'
  }
  function key(d) {
    var owner = d.closest('[data-server]')
    return (owner === null ? '' : owner.dataset.server) + '|' + d.dataset.kind + '|' + d.dataset.set
  }
  if (typeof EventSource === 'undefined') return
  var events = new EventSource('status/events')
  events.addEventListener('status', function (e) {
    var next = new DOMParser().parseFromString(e.data, 'text/html').getElementById('status')
    var main = document.getElementById('status')
    if (next === null || main === null) return
    var open = []
    main.querySelectorAll('details[open]').forEach(function (d) {
      open.push(key(d))
    })
    var adopted = document.adoptNode(next)
    main.replaceWith(adopted)
    adopted.querySelectorAll('details').forEach(function (d) {
      if (open.indexOf(key(d)) !== -1) d.open = true
    })
    mark('live', true)
  })
  events.addEventListener('error', function () {
    mark('reconnecting…', false)
  })
})()
`

export const STATUS_CSS = `:root { color-scheme: light dark; --fg: #1d232a; --muted: #5b6572; --bg: #fbfbfc; --card: #fff;
  --line: #d8dde3; --good: #1a7f37; --bad: #c62828; --warn: #9a6700; font: 14px/1.45 system-ui, sans-serif; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e9ed; --muted: #9aa4af; --bg: #15181c; --card: #1d2126;
  --line: #333a42; --good: #4ac26b; --bad: #ff6b6b; --warn: #d4a72c; } }
body { margin: 0; background: var(--bg); color: var(--fg); }
header { display: flex; align-items: baseline; gap: .75rem; padding: .75rem 1.25rem; border-bottom: 1px solid var(--line); background: var(--card); }
header h1 { font-size: 1.25rem; margin: 0; }
.version { color: var(--muted); }
.live { margin-left: auto; padding: .1rem .6rem; border-radius: 1rem; border: 1px solid var(--line); color: var(--muted); }
.live.on { color: var(--good); border-color: var(--good); }
.live.off { color: var(--warn); border-color: var(--warn); }
.sign-out { margin: 0; }
.sign-out button { font: inherit; color: var(--muted); background: none; border: 1px solid var(--line); border-radius: 1rem; padding: .1rem .6rem; cursor: pointer; }
main { padding: 0 1.25rem 2rem; max-width: 1600px; display: grid; gap: 0 1.25rem;
  grid-template-columns: repeat(auto-fit, minmax(min(100%, 34rem), 1fr)); align-items: start; }
#gateway, #charts, #servers, #virtual-servers, #policy, #catalog, #configuration, .footnote { grid-column: 1 / -1; }
#servers > article { margin-bottom: .5rem; }
section { margin-top: 1.25rem; padding: .75rem 1rem; background: var(--card); border: 1px solid var(--line); border-radius: 6px; }
h2 { font-size: 1.1rem; margin: 0 0 .5rem; }
h3 { font-size: 1rem; margin: .75rem 0 .35rem; }
h3 small { color: var(--muted); font-weight: normal; }
h4 { margin: .25rem 0; font-size: .95rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; margin: .35rem 0; }
th, td { text-align: left; padding: .2rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: break-word; }
td code { overflow-wrap: anywhere; }
th { color: var(--muted); font-weight: 600; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.num.warn { color: var(--warn); }
table.traffic { table-layout: fixed; }
table.traffic th:first-child { width: 6.5rem; }
table.tools, table.replicas { max-width: 72rem; }
table.tools caption { caption-side: bottom; text-align: left; color: var(--muted); font-size: .85em; padding-top: .2rem; }
.empty { color: var(--muted); font-style: italic; margin: .35rem 0; }
.muted, small { color: var(--muted); }
p.outcomes { margin: .1rem 0 .5rem; font-size: .9em; }
.outcome.ok, .outcome.cache { color: var(--good); }
.outcome.refused, .outcome.limited, .outcome.denied, .outcome.backend { color: var(--warn); }
.outcome.failed { color: var(--bad); }
.config-servers { display: grid; gap: 0 1.25rem; grid-template-columns: repeat(auto-fit, minmax(min(100%, 30rem), 1fr)); }
code { font-family: ui-monospace, monospace; font-size: .92em; }
.good { color: var(--good); }
.bad { color: var(--bad); }
.state { padding: 0 .45rem; border-radius: .6rem; border: 1px solid currentColor; }
.state.healthy, .state.connected { color: var(--good); }
.state.unhealthy, .state.bypassed { color: var(--bad); }
.state.ejected, .state.draining, .state.connecting { color: var(--warn); }
.outcome { display: inline-block; margin-right: .5rem; color: var(--muted); }
.warnings li, .problems li { color: var(--warn); }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; }
figure.chart { margin: 0; }
figure.chart figcaption { color: var(--muted); margin-bottom: .2rem; }
figure.chart svg { max-width: 100%; height: auto; }
.axis { stroke: var(--muted); stroke-width: 1; }
.grid { stroke: var(--line); stroke-dasharray: 3 3; }
.tick { fill: var(--muted); font-size: 10px; }
polyline.series { fill: none; stroke-width: 1.6; }
circle.point { stroke: none; fill: currentColor; fill-opacity: 0; }
circle.point.single, circle.point:hover { fill-opacity: 1; }
.s0.point { color: #2f6fde; } .s1.point { color: #e0731f; } .s2.point { color: #2a9d55; } .s3.point { color: #c23b7a; }
.s4.point { color: #7a5cd6; } .s5.point { color: #8c6a2a; } .s6.point { color: #199aa8; } .s7.point { color: #7d8791; }
.legend { list-style: none; display: flex; flex-wrap: wrap; gap: .75rem; padding: 0; margin: .2rem 0 0; }
.swatch { display: inline-block; width: .8rem; height: .25rem; margin-right: .3rem; vertical-align: middle; }
.s0 { stroke: #2f6fde; background: #2f6fde; } .s1 { stroke: #e0731f; background: #e0731f; }
.s2 { stroke: #2a9d55; background: #2a9d55; } .s3 { stroke: #c23b7a; background: #c23b7a; }
.s4 { stroke: #7a5cd6; background: #7a5cd6; } .s5 { stroke: #8c6a2a; background: #8c6a2a; }
.s6 { stroke: #199aa8; background: #199aa8; } .s7 { stroke: #7d8791; background: #7d8791; }
.kinds { display: flex; flex-wrap: wrap; gap: 2rem; }
ul.names { margin: .2rem 0 .4rem 1rem; padding: 0; }
.footnote { color: var(--muted); margin-top: 1rem; }
.login { max-width: 26rem; margin: 4rem auto; }
.login input { width: 100%; padding: .4rem; margin: .4rem 0; box-sizing: border-box; }
`

/** The page's icon (browsers ask for one; without it each load logs a 404). */
export const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#2f6fde"/><path d="M3 11h2V7H3zm4 0h2V4H7zm4 0h2V8h-2z" fill="#fff"/></svg>\n'
