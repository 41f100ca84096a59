import { html, type Html } from './html.js'

/** How the page writes figures: one place, so every table says them the same way. */

export function percent(share: number | null): string {
  return share === null ? '—' : `${(share * 100).toFixed(share > 0 && share < 0.01 ? 2 : 1)}%`
}

/** A latency from the histograms (ms, fractional). */
export function ms(v: number | null): string {
  if (v === null) return '—'
  return v < 10 ? `${v.toFixed(2)} ms` : `${Math.round(v)} ms`
}

/** A configured duration (whole ms): `250 ms`, `30 s`, `5 min`. */
export function span(msValue: number): string {
  if (msValue < 1000 || msValue % 1000 !== 0) return `${msValue} ms`
  const s = msValue / 1000
  if (s < 60 || s % 60 !== 0) return `${s} s`
  const m = s / 60
  return m < 60 || m % 60 !== 0 ? `${m} min` : `${m / 60} h`
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  return `${(n / 1024 / 1024).toFixed(1)} MiB`
}

export function duration(seconds: number): string {
  const d = Math.floor(seconds / 86_400)
  const h = Math.floor((seconds % 86_400) / 3600)
  const m = Math.floor((seconds % 3600) / 60)
  const s = seconds % 60
  if (d > 0) return `${d} d ${h} h`
  if (h > 0) return `${h} h ${m} min`
  if (m > 0) return `${m} min ${s} s`
  return `${s} s`
}

/** `3 replicas`, `1 replica`. */
export function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`
}

/** Requests per second, as the page prints them. */
export function formatRate(v: number): string {
  if (v === 0) return '0/s'
  if (v < 0.1) return `${v.toFixed(3)}/s`
  if (v < 10) return `${v.toFixed(2)}/s`
  return `${Math.round(v)}/s`
}

/** The sentence a panel shows in place of an empty table: why it is empty. */
export function empty(sentence: string | Html): Html {
  return html`<p class="empty">${sentence}</p>`
}
