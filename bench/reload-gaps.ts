/**
 * The in-process reload of `npm run bench:scale` (scale-inproc.ts `reloadGaps`), in a process of
 * its own that loads policies as the gateway does: the built loader (`dist/`, which
 * `npm run bench:scale` builds first), so that a reload's reader runs the shipped
 * policy-reader.js, and under the node flags the gateway ships with (its young generation's size
 * decides how long each collection during a reload pauses the thread).
 *
 * Usage: node <shipped flags> --import tsx bench/reload-gaps.ts <folder>
 * Prints one JSON line: heldMs; besideMs and the tick gaps (ms, ascending) during a reload of an
 * edit of one rule beside the running policy, and over as long with nothing loading; freshMs and
 * the gaps while every rule is compiled anew (no running policy to take unchanged rules from).
 */
import { readFileSync, writeFileSync } from 'node:fs'
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
const running = loadPolicySet({ ...opts, offThreadBytes: Infinity })
sink += running.rules.length
const heldMs = performance.now() - t0

/** The gaps while `load` runs, how long it took, and the gaps over as long with nothing loading. */
async function measured(
  load: () => Promise<{ rules: readonly unknown[] }>,
): Promise<{ ms: number; gaps: number[]; idle: number[] }> {
  const t = performance.now()
  const gaps = await gapsDuring(load().then((p) => (sink += p.rules.length)))
  const ms = performance.now() - t
  return { ms, gaps, idle: await gapsDuring(new Promise((resolve) => setTimeout(resolve, ms))) }
}

// The first read beside starts the reader's worker, whose code V8 compiles on its helper threads
// at this process's priority: a gateway pays that on its first reload, and after a minute without
// one (off-thread.ts), not on every reload.
sink += (await loadPolicySetBeside(opts, running)).rules.length
// An edit of one rule, as bench:scale's reload under load makes it, read beside the running
// policy: what the gateway does on an operator's edit.
const file = join(folder, 'policy.yaml')
writeFileSync(file, readFileSync(file, 'utf8').replace('"get_*"', '"get_*", "reload_1_*"'))
const edit = await measured(() => loadPolicySetBeside(opts, running))
// Every rule taken in anew (no running policy to take unchanged rules from): the serving thread
// compiles all 10,000. The worker kept the file it read for the edit, whose text has not changed
// since, so this read does not parse it again (policy/load.ts KeptFiles).
const fresh = await measured(() => loadPolicySetBeside(opts))
process.stdout.write(
  `${JSON.stringify({ heldMs, besideMs: edit.ms, beside: edit.gaps, idle: edit.idle, freshMs: fresh.ms, fresh: fresh.gaps, sink })}\n`,
)
