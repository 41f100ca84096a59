/** Turns cell measurements into the ratios the project is judged on, as markdown and JSON. */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { CellMeasurement } from './measure.js'
import type { BenchMethod } from './requests.js'

export type TargetId =
  | 'direct'
  | 'gateway'
  | 'gateway-verify'
  | 'cache-hit'
  | 'gateway-policy'
  | 'gateway-limit'
  | 'gateway-limit-redis'
  | 'gateway-virtual'

/** Row labels; the legend under the table says what each one is. */
export const TARGET_LABELS: Readonly<Record<TargetId, string>> = {
  direct: 'direct',
  gateway: 'gateway',
  'gateway-verify': 'gateway, verify body',
  'cache-hit': 'gateway, cache hit',
  'gateway-policy': 'gateway, policy',
  'gateway-limit': 'gateway, policy + local limit',
  'gateway-limit-redis': 'gateway, policy + Redis limit',
  'gateway-virtual': 'gateway, via virtual server',
}

/** One measured cell, or a cache-hit row that could not be measured (`skipped` says why). */
export interface Cell {
  readonly method: BenchMethod
  readonly target: TargetId
  readonly connections: number
  readonly measured?: CellMeasurement
  readonly skipped?: string
}

/** Gateway figures relative to the direct cell with the same method and concurrency. */
interface Ratios {
  /** Gateway CPU per request ÷ the backend's CPU per request when answering directly. */
  readonly gatewayCpuVsBackend: number | null
  readonly throughputVsDirect: number
  readonly addedP50Ms: number
}

export interface Report {
  readonly meta: Readonly<Record<string, string | number | boolean>>
  readonly cells: readonly (Cell & { readonly ratios?: Ratios })[]
}

/** Attaches ratios to every gateway cell that has a direct twin. */
export function buildReport(meta: Report['meta'], cells: readonly Cell[]): Report {
  const direct = (c: Cell): CellMeasurement | undefined =>
    cells.find(
      (d) => d.target === 'direct' && d.method === c.method && d.connections === c.connections,
    )?.measured
  return {
    meta,
    cells: cells.map((cell) => {
      const base = direct(cell)
      const m = cell.measured
      if (cell.target === 'direct' || base === undefined || m === undefined) return cell
      const ratios: Ratios = {
        gatewayCpuVsBackend:
          m.gatewayCpuUsPerReq === null ? null : m.gatewayCpuUsPerReq / base.backendCpuUsPerReq,
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
    "  is the `gateway` row's server; it is routed by name (body parsed). Target: within 15% of",
    '  the **gateway, verify body** row, the member endpoint that also parses (docs/virtual-servers.md).',
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
    r?.gatewayCpuVsBackend === undefined || r.gatewayCpuVsBackend === null
      ? '–'
      : fmt(r.gatewayCpuVsBackend, 2),
    r === undefined ? '–' : fmt(r.throughputVsDirect, 2),
    r === undefined ? '–' : (r.addedP50Ms >= 0 ? '+' : '') + fmt(r.addedP50Ms, 3),
    fmt(m.backendPerResponse, 2),
    String(m.non2xx),
    String(m.errors),
    fmt(m.clientCpuPct, 0),
  ]
  return `| ${[...head, ...values].join(' | ')} |`
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
