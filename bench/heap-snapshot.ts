/**
 * Heap snapshots of a gateway child process, read as one figure: its live JS heap.
 *
 * The gateway must run with `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=<dir>`: SIGUSR2 then
 * makes it write `Heap.<date>.<time>.<pid>.<thread>.<seq>.heapsnapshot` into `dir`. V8 runs a
 * full collection before it walks the heap, so a snapshot holds only live objects, and the sum of
 * their `self_size` is the heap the process holds (its main thread's; worker threads have their
 * own heaps, not in it).
 */
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'

/** The node flags that let `heapSnapshotBytes` ask a gateway for a snapshot written into `dir`. */
export function heapSnapshotFlags(dir: string): string {
  return `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}`
}

/** The part of the `.heapsnapshot` JSON format this file reads. */
interface HeapSnapshotJson {
  readonly snapshot: { readonly meta: { readonly node_fields: readonly string[] } }
  readonly nodes: readonly number[]
}

/** The sum of every node's `self_size` in a `.heapsnapshot` file: the live heap, in bytes. */
function liveHeapBytes(file: string): number {
  // Parsed whole: simpler than a streaming parser, and the bench's snapshots fit in memory.
  const snap = JSON.parse(readFileSync(file, 'utf8')) as HeapSnapshotJson
  const fields = snap.snapshot.meta.node_fields
  const selfSize = fields.indexOf('self_size')
  if (selfSize < 0) throw new Error(`${file}: no self_size among the node fields`)
  let bytes = 0
  for (let i = selfSize; i < snap.nodes.length; i += fields.length) bytes += snap.nodes[i] as number
  return bytes
}

/**
 * Has the gateway `pid` (started with `heapSnapshotFlags(dir)`) write a heap snapshot, and
 * returns its live heap in bytes. The file is deleted once read: each is tens of MB.
 */
export async function heapSnapshotBytes(
  pid: number,
  dir: string,
  baseUrl: string,
): Promise<number> {
  const ours = (): string[] =>
    readdirSync(dir).filter((f) => f.endsWith('.heapsnapshot') && f.includes(`.${pid}.`))
  const before = new Set(ours())
  process.kill(pid, 'SIGUSR2')
  let file: string | undefined
  for (let i = 0; i < 600 && file === undefined; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    file = ours().find((f) => !before.has(f))
  }
  if (file === undefined) throw new Error(`gateway ${pid}: no heap snapshot within 30 s`)
  // The gateway writes the snapshot on its only thread, synchronously: it answers /healthz again
  // only once the file is whole.
  const res = await request(`${baseUrl}/healthz`, { headersTimeout: 300_000 })
  await res.body.dump()
  const path = join(dir, file)
  try {
    return liveHeapBytes(path)
  } finally {
    rmSync(path, { force: true })
  }
}
