/** Turns cell measurements into the ratios the project is judged on, as markdown and JSON. */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { CellMeasurement } from './measure.js'
import type { BenchMethod } from './requests.js'

export type TargetId =
  | 'direct'
  | 'floor'
  | 'gateway'
  | 'gateway-verify'
  | 'cache-hit'
  | 'gateway-policy'
  | 'gateway-limit'
  | 'gateway-limit-redis'
  | 'gateway-virtual'
  | 'gateway-auth-policy'
  | 'cache-hit-policy'
  | 'cache-hit-curated'

/** Row labels; the legend under the table says what each one is. */
export const TARGET_LABELS: Readonly<Record<TargetId, string>> = {
  direct: 'direct',
  floor: 'floor proxy',
  gateway: 'gateway',
  'gateway-verify': 'gateway, verify body',
  'cache-hit': 'gateway, cache hit',
  'gateway-policy': 'gateway, policy',
  'gateway-limit': 'gateway, policy + local limit',
  'gateway-limit-redis': 'gateway, policy + Redis limit',
  'gateway-virtual': 'gateway, via virtual server',
  'gateway-auth-policy': 'gateway, JWT + 20 rules',
  'cache-hit-policy': 'gateway, cache hit + policy filter',
  'cache-hit-curated': 'gateway, cache hit + curated catalog',
}

/** One measured cell, or a cache-hit row that could not be measured (`skipped` says why). */
export interface Cell {
  readonly method: BenchMethod
  readonly target: TargetId
  readonly connections: number
  readonly measured?: CellMeasurement
  readonly skipped?: string
}

/** Gateway figures relative to the direct and floor cells with the same method and concurrency. */
interface Ratios {
  /** Gateway CPU per request ÷ the backend's CPU per request when answering directly. */
  readonly gatewayCpuVsBackend: number | null
  /** Gateway CPU per request ÷ the floor proxy's CPU per request (null without a floor cell). */
  readonly gatewayCpuVsFloor: number | null
  /** p50 latency ÷ the floor proxy's p50 (null without a floor cell). */
  readonly p50VsFloor: number | null
  readonly throughputVsDirect: number
  readonly addedP50Ms: number
}

export interface Report {
  readonly meta: Readonly<Record<string, string | number | boolean>>
  readonly cells: readonly (Cell & { readonly ratios?: Ratios })[]
}

/** Attaches ratios to every proxied cell that has a direct twin (and a floor twin, if run). */
export function buildReport(meta: Report['meta'], cells: readonly Cell[]): Report {
  const twin = (target: TargetId, c: Cell): CellMeasurement | undefined =>
    cells.find(
      (d) => d.target === target && d.method === c.method && d.connections === c.connections,
    )?.measured
  return {
    meta,
    cells: cells.map((cell) => {
      const base = twin('direct', cell)
      const floor = twin('floor', cell)
      const m = cell.measured
      if (cell.target === 'direct' || base === undefined || m === undefined) return cell
      const floorCpu = floor?.gatewayCpuUsPerReq ?? null
      const ratios: Ratios = {
        gatewayCpuVsBackend:
          m.gatewayCpuUsPerReq === null ? null : m.gatewayCpuUsPerReq / base.backendCpuUsPerReq,
        gatewayCpuVsFloor:
          m.gatewayCpuUsPerReq === null || floorCpu === null || cell.target === 'floor'
            ? null
            : m.gatewayCpuUsPerReq / floorCpu,
        p50VsFloor: floor === undefined || cell.target === 'floor' ? null : m.p50Ms / floor.p50Ms,
        throughputVsDirect: m.rps / base.rps,
        addedP50Ms: m.p50Ms - base.p50Ms,
      }
      return { ...cell, ratios }
    }),
  }
}

const HEADER = [
  'method',
  'target',
  'c',
  'req/s',
  'p50 ms',
  'p99 ms',
  'gateway µs/req',
  'backend µs/req',
  'gateway ÷ backend CPU',
  'CPU ÷ floor',
  'p50 ÷ floor',
  'req/s ÷ direct',
  '+p50 ms',
  'backend hits/req',
  'non-2xx',
  'errors',
  'client CPU %',
]

/** The markdown report: metadata, one table, and a legend. */
export function renderMarkdown(report: Report): string {
  const meta = Object.entries(report.meta).map(([k, v]) => `- ${k}: ${String(v)}`)
  const rows = report.cells.map(renderRow)
  return [
    '# mcp-edge bench',
    '',
    ...meta,
    '',
    `| ${HEADER.join(' | ')} |`,
    `|${HEADER.map((_, i) => (i < 2 ? '---' : '---:')).join('|')}|`,
    ...rows,
    '',
    '- **direct**: load straight at the backend.',
    '- **floor proxy**: a bare `node:http` server handing the body to undici `Pool.stream` (no',
    '  parsing, no logging; floor.ts), pinned where the gateway runs. `CPU ÷ floor` and',
    "  `p50 ÷ floor` divide a row's proxy CPU per request and p50 by this row's.",
    '- **gateway**: through the gateway, `trustHeaders: true`; its tools/list route serves a',
    '  `no-store` list, so that row is always forwarded.',
    '- **gateway, verify body**: `trustHeaders: false`; the gateway reads and checks the body.',
    '- **gateway, cache hit**: tools/list of a cacheable list; shown only when the backend saw',
    '  no requests during it.',
    '- **gateway, policy**: `trustHeaders: true` with a policy folder (one allow-all rule).',
    '- **gateway, policy + local limit** / **+ Redis limit**: the same plus one rate limit on',
    '  every tool call (`key: ip`, never reached), held in memory or in a local redis-server; the',
    '  CPU a limit costs is the difference to the policy row (docs/rate-limits.md).',
    '- **gateway, via virtual server**: the same tools/call sent to a virtual server whose member',
    "  is the `gateway` row's server (`trustHeaders: true`), so it is routed on its Mcp-Name without",
    '  reading the body, as that endpoint does. Target: within 15% of the **gateway** row, the same',
    "  call to the member's own endpoint (docs/virtual-servers.md).",
    '- **gateway, JWT + 20 rules**: the default `trustHeaders: false`, with JWT auth (ES256 key',
    '  file; verified tokens remembered, as by default) and a 20-rule policy.',
    '- **gateway, cache hit + policy filter**: the cacheable tools/list through the **policy**',
    '  gateway: an org-wide filter keeps the entry `public` (docs/cache.md).',
    '- **gateway, cache hit + curated catalog**: the cacheable tools/list of a server with a',
    '  curated catalog (two renames, replaced text and title): the rewrite is built once per',
    '  cached list, so a hit should cost what a plain hit costs (docs/catalog.md §Curation).',
    '',
    "CPU per request is each process's utime+stime (/proc) over the measured window ÷ responses",
    "in it. `gateway ÷ backend CPU` divides by the backend's figure in the direct row with the",
    'same method and c. Trust CPU per request first: on this shared machine throughput and',
    'latency are context. `client CPU %` near 100 means the load generator was the limit.',
    '',
  ].join('\n')
}

function renderRow(cell: Report['cells'][number]): string {
  const head = [cell.method, TARGET_LABELS[cell.target]]
  const m = cell.measured
  if (m === undefined) {
    const blanks = HEADER.slice(4).map(() => '')
    return `| ${[...head, '–', cell.skipped ?? 'not run', ...blanks].join(' | ')} |`
  }
  const r = cell.ratios
  const values = [
    String(cell.connections),
    fmt(m.rps, 0),
    fmt(m.p50Ms, 3),
    fmt(m.p99Ms, 3),
    m.gatewayCpuUsPerReq === null ? '–' : fmt(m.gatewayCpuUsPerReq, 0),
    fmt(m.backendCpuUsPerReq, 0),
    ratio(r?.gatewayCpuVsBackend),
    ratio(r?.gatewayCpuVsFloor),
    ratio(r?.p50VsFloor),
    r === undefined ? '–' : fmt(r.throughputVsDirect, 2),
    r === undefined ? '–' : (r.addedP50Ms >= 0 ? '+' : '') + fmt(r.addedP50Ms, 3),
    fmt(m.backendPerResponse, 2),
    String(m.non2xx),
    String(m.errors),
    fmt(m.clientCpuPct, 0),
  ]
  return `| ${[...head, ...values].join(' | ')} |`
}

function ratio(value: number | null | undefined): string {
  return value === undefined || value === null ? '–' : fmt(value, 2)
}

function fmt(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a'
}

/** Writes latest.json and latest.md under `dir` (gitignored). */
export async function writeReport(dir: string, report: Report, markdown: string): Promise<void> {
  await mkdir(dir, { recursive: true })
  await writeFile(join(dir, 'latest.json'), `${JSON.stringify(report, null, 2)}\n`)
  await writeFile(join(dir, 'latest.md'), markdown)
}
