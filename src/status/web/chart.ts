import { formatRate } from './format.js'
import { html, type Html } from './html.js'
import type { HistoryPoint } from '../windows.js'

/** Series colours are classes (status.css `.s0` … `.s7`): the CSP allows no inline style. */
const SERIES = 8
const WIDTH = 640
const HEIGHT = 150
const PAD = { left: 44, right: 8, top: 8, bottom: 20 }

/** One server's line. */
export interface ChartSeries {
  readonly name: string
  readonly points: readonly HistoryPoint[]
}

/**
 * A line chart in plain SVG (no script, no framework) of one value per server over the chart's
 * time span: requests per second, or the cache's hit ratio (0…1, gaps where nothing was cached).
 * Every point is a circle whose `<title>` the browser shows on hover (the value, the server and
 * the time), so values read without script; a point with no neighbour (a run of one, which a
 * polyline cannot draw) is drawn as a visible dot.
 */
export function lineChart(
  title: string,
  series: readonly ChartSeries[],
  value: (p: HistoryPoint) => number | null,
  opts: { readonly end: number; readonly spanMs: number; readonly ratio: boolean },
): Html {
  const start = opts.end - opts.spanMs
  const values = series.flatMap((s) => s.points.map(value).filter((v): v is number => v !== null))
  const max = opts.ratio ? 1 : niceMax(Math.max(0, ...values))
  const w = WIDTH - PAD.left - PAD.right
  const h = HEIGHT - PAD.top - PAD.bottom
  const x = (at: number): number => PAD.left + (w * Math.max(0, at - start)) / opts.spanMs
  const y = (v: number): number => PAD.top + h - (h * Math.min(v, max)) / (max || 1)
  const label = (v: number): string => (opts.ratio ? `${Math.round(v * 100)}%` : formatRate(v))
  const lines = series.map((s, i) => {
    // A gap (null) ends one polyline and the next value starts another.
    const runs: Point[][] = [[]]
    for (const p of s.points) {
      const v = value(p)
      const at = Date.parse(p.at)
      if (v === null || at < start) {
        if ((runs[runs.length - 1] ?? []).length > 0) runs.push([])
        continue
      }
      runs[runs.length - 1]?.push({ x: x(at).toFixed(1), y: y(v).toFixed(1), v, at: p.at })
    }
    const cls = `s${i % SERIES}`
    return runs
      .filter((r) => r.length > 0)
      .map(
        (r) =>
          html`${
            r.length > 1
              ? html`<polyline
                  class="series ${cls}"
                  points="${r.map((p) => `${p.x},${p.y}`).join(' ')}"
                ></polyline>`
              : ''
          }${r.map(
            (p) =>
              html`<circle
                class="point ${cls}${r.length === 1 ? ' single' : ''}"
                cx="${p.x}"
                cy="${p.y}"
                r="${r.length === 1 ? 3 : 4}"
                ><title>${s.name}: ${label(p.v)} at ${p.at.slice(11, 19)} UTC</title></circle
              >`,
          )}`,
      )
  })
  return html`<figure class="chart">
    <figcaption>${title}</figcaption>
    <svg
      viewBox="0 0 ${WIDTH} ${HEIGHT}"
      width="${WIDTH}"
      height="${HEIGHT}"
      role="img"
      aria-label="${title}"
    >
      <line
        class="axis"
        x1="${PAD.left}"
        y1="${PAD.top + h}"
        x2="${WIDTH - PAD.right}"
        y2="${PAD.top + h}"
      ></line>
      <line
        class="axis"
        x1="${PAD.left}"
        y1="${PAD.top}"
        x2="${PAD.left}"
        y2="${PAD.top + h}"
      ></line>
      <line
        class="grid"
        x1="${PAD.left}"
        y1="${PAD.top}"
        x2="${WIDTH - PAD.right}"
        y2="${PAD.top}"
      ></line>
      <text class="tick" x="${PAD.left - 4}" y="${PAD.top + 4}" text-anchor="end">
        ${label(max)}
      </text>
      <text class="tick" x="${PAD.left - 4}" y="${PAD.top + h}" text-anchor="end">${label(0)}</text>
      <text class="tick" x="${PAD.left}" y="${HEIGHT - 4}">
        −${Math.round(opts.spanMs / 60_000)} min
      </text>
      <text class="tick" x="${WIDTH - PAD.right}" y="${HEIGHT - 4}" text-anchor="end">now</text>
      ${lines}
    </svg>
    <ul class="legend">
      ${series.map((s, i) => html`<li><span class="swatch s${i % SERIES}"></span>${s.name}</li>`)}
    </ul>
  </figure>`
}

/** One drawn point: its place, its value and the end of its interval. */
interface Point {
  readonly x: string
  readonly y: string
  readonly v: number
  readonly at: string
}

/** A round upper bound for a rate axis: 1, 2 or 5 times a power of ten. */
function niceMax(v: number): number {
  if (v <= 0) return 1
  const p = 10 ** Math.floor(Math.log10(v))
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p
  return 10 * p
}
