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
  const lines = series.map((s, i) => {
    // A gap (null) ends one polyline and the next value starts another.
    const runs: string[][] = [[]]
    for (const p of s.points) {
      const v = value(p)
      const at = Date.parse(p.at)
      if (v === null || at < start) {
        if ((runs[runs.length - 1] ?? []).length > 0) runs.push([])
        continue
      }
      runs[runs.length - 1]?.push(`${x(at).toFixed(1)},${y(v).toFixed(1)}`)
    }
    return runs
      .filter((r) => r.length > 0)
      .map(
        (r) =>
          html`<polyline class="series s${i % SERIES}" points="${r.join(' ')}"
            ><title>${s.name}</title></polyline
          >`,
      )
  })
  const label = (v: number): string => (opts.ratio ? `${Math.round(v * 100)}%` : formatRate(v))
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

/** A round upper bound for a rate axis: 1, 2 or 5 times a power of ten. */
function niceMax(v: number): number {
  if (v <= 0) return 1
  const p = 10 ** Math.floor(Math.log10(v))
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p
  return 10 * p
}

/** Requests per second, as the page prints them. */
export function formatRate(v: number): string {
  if (v === 0) return '0/s'
  if (v < 0.1) return `${v.toFixed(3)}/s`
  if (v < 10) return `${v.toFixed(2)}/s`
  return `${Math.round(v)}/s`
}
