import { callerLabel, type CallerId } from './caller.js'

/** Callers shown as currently limited: the most refused in the window. */
export const TOP_LIMITED = 20
/** A caller refused within this long is "currently limited". */
export const LIMITED_WINDOW_MS = 60_000
/** (limit, caller) pairs tracked; the least recently refused one makes room for a new one. */
const MAX_TRACKED = 1000

/** One caller a limit is refusing, as status.json lists it. */
export interface LimitedRecord {
  /** The limit's name (policy files). */
  readonly limit: string
  /** What the limit is keyed on (`claim:sub`, `ip`, `header:X-Api-Key` …): never its value. */
  readonly key: string
  /** caller.ts callerLabel: a short hash unless `admin.showSubjects`. */
  readonly caller: string
  /** Requests refused within the window. */
  readonly refused: number
  /** ISO time of the last refusal. */
  readonly lastAt: string
}

/** A refusal as the audit log hands it over. */
export interface LimitedEvent {
  readonly caller: CallerId | undefined
  readonly limit: string
  readonly key: string
}

/** The window in one-second slots: a caller's refusals are counted per second, not kept one by one. */
const SLOTS = LIMITED_WINDOW_MS / 1000

interface Tracked {
  readonly limit: string
  readonly key: string
  readonly caller: string
  /** Refusals per second of the window; `seconds[i]` is the second `counts[i]` is for. */
  readonly counts: number[]
  readonly seconds: number[]
  /** Time of the last refusal. */
  last: number
}

/**
 * The callers limits are refusing now, fed by the audit log's rate-limit events (status/tap.ts):
 * bounded by MAX_TRACKED pairs of SLOTS counters each, whatever the traffic. The refusals per
 * limit since start are the `mcp_edge_rate_limited_total` counter, not counted here.
 */
export class LimitedCallers {
  /** Insertion order is refusal order: the first entry is the least recently refused. */
  private readonly tracked = new Map<string, Tracked>()

  constructor(
    private readonly showSubjects: boolean,
    private readonly now: () => number = Date.now,
  ) {}

  refused(e: LimitedEvent): void {
    const caller = callerLabel(e.caller, this.showSubjects)
    const id = `${e.limit}\n${e.key}\n${caller}`
    let t = this.tracked.get(id)
    if (t === undefined) {
      if (this.tracked.size >= MAX_TRACKED) {
        const oldest = this.tracked.keys().next().value
        if (oldest !== undefined) this.tracked.delete(oldest)
      }
      const zeros = (): number[] => Array.from({ length: SLOTS }, () => 0)
      t = { limit: e.limit, key: e.key, caller, counts: zeros(), seconds: zeros(), last: 0 }
    } else this.tracked.delete(id) // re-inserted below: most recent last
    this.tracked.set(id, t)
    const now = this.now()
    const second = Math.floor(now / 1000)
    const i = second % SLOTS
    if (t.seconds[i] !== second) {
      t.seconds[i] = second
      t.counts[i] = 0
    }
    t.counts[i] = (t.counts[i] ?? 0) + 1
    t.last = now
  }

  /** The TOP_LIMITED callers refused most within the window, most refused first. */
  report(): LimitedRecord[] {
    const now = this.now()
    const oldest = Math.floor(now / 1000) - SLOTS
    const out: LimitedRecord[] = []
    for (const [id, t] of this.tracked) {
      if (now - t.last >= LIMITED_WINDOW_MS) {
        this.tracked.delete(id)
        continue
      }
      let refused = 0
      for (let i = 0; i < SLOTS; i++) if ((t.seconds[i] ?? 0) > oldest) refused += t.counts[i] ?? 0
      const { limit, key, caller } = t
      out.push({ limit, key, caller, refused, lastAt: new Date(t.last).toISOString() })
    }
    return topLimited(out)
  }
}

/** Most refused first, then most recent; at most TOP_LIMITED (also used to merge workers). */
export function topLimited(records: readonly LimitedRecord[]): LimitedRecord[] {
  return [...records]
    .sort((a, b) => b.refused - a.refused || b.lastAt.localeCompare(a.lastAt))
    .slice(0, TOP_LIMITED)
}
