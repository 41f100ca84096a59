/**
 * The in-process reload of `npm run bench:scale` (scale-inproc.ts `reloadGaps`), in a process of
 * its own that loads policies as the gateway does: the built loader (`dist/`, which
 * `npm run bench:scale` builds first), so that a reload's worker runs the shipped
 * policy-worker.js, and under the node flags the gateway ships with (its young generation's size
 * decides how long each collection during a reload pauses the thread).
 *
 * Usage: node <shipped flags> --import tsx bench/reload-gaps.ts <folder>
 * Prints one JSON line: heldMs, besideMs and the tick gaps (ms, ascending) during the reload
 * beside a running policy and over as long with nothing loading.
 */
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type * as Load from '../src/policy/load.js'

const folder = process.argv[2]
if (folder === undefined) throw new Error('usage: reload-gaps.ts <policy folder>')
const dist = join(import.meta.dirname, '..', 'dist', 'policy', 'load.js')
const { loadPolicySet, loadPolicySetBeside } = (await import(
  pathToFileURL(dist).href
)) as typeof Load

/** Gaps between the ticks of a 1 ms timer while `work` runs (ms, ascending). */
async function gapsDuring(work: Promise<unknown>): Promise<number[]> {
  const gaps: number[] = []
  let last = performance.now()
  const timer = setInterval(() => {
    const now = performance.now()
    gaps.push(now - last)
    last = now
  }, 1)
  try {
    await work
  } finally {
    clearInterval(timer)
  }
  return gaps.sort((a, b) => a - b)
}

const opts = { folder, label: 'scale', mode: 'enforce', servers: ['bench'] } as const
let sink = 0
const t0 = performance.now()
sink += loadPolicySet({ ...opts, offThreadBytes: Infinity }).rules.length
const heldMs = performance.now() - t0
const t1 = performance.now()
const beside = await gapsDuring(loadPolicySetBeside(opts).then((p) => (sink += p.rules.length)))
const besideMs = performance.now() - t1
const idle = await gapsDuring(new Promise((resolve) => setTimeout(resolve, besideMs)))
process.stdout.write(`${JSON.stringify({ heldMs, besideMs, beside, idle, sink })}\n`)
