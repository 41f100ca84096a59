import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { getPriority, setPriority } from 'node:os'

/**
 * How the threads whose work no request waits on give way to the one that serves requests
 * (docs/operations.md §Sizing, Threads). Linux nice values are per thread (setpriority(2),
 * NOTES): ten above the serving thread's, a thread gets about a tenth of a core the serving
 * thread keeps busy (CFS weights 110 against 1024) and all the time it leaves idle.
 */
const STEP = 10
/** The highest nice value (the lowest priority) Linux has. */
const LOWEST = 19

/** The nice value a yielding thread takes: STEP above the calling thread's own. */
function yieldingNice(): number {
  return Math.min(LOWEST, getPriority() + STEP)
}

/** How far yieldThisProcess() got: Linux's idle class, a nice value only, or neither. */
type Yielded = 'idle' | 'nice' | 'unchanged'

/**
 * Lowers every thread of this process (a reload's reader, policy/policy-reader.ts, which does
 * nothing else) to yieldingNice(), then puts them all in Linux's idle scheduling class
 * (SCHED_IDLE, sched(7)). A nice value only weighs a thread's share of the core: under EEVDF
 * (Linux 6.6 and later) a reader at nice 10 on the serving thread's core keeps it for the rest of
 * its time slice while the serving thread, woken by a request, waits. A thread of the normal class
 * that wakes takes the core from an idle-class one, as a rule at once (a trace on Linux 6.18 also
 * showed waits of 3–5 ms after the reader's own message woke the serving thread, bench/README.md
 * §scale). Every thread: V8's platform threads compile the reader's code and collect its heap,
 * and at the serving thread's class they would take the core from it as the reader's main thread
 * would. Threads started later take the class and nice value of the thread that starts them.
 *
 * Node has no call for the class, so `chrt` (util-linux, or busybox) sets it for every thread of
 * the process; where it is missing or not allowed, the threads keep the nice value alone. A
 * thread cannot leave the idle class without CAP_SYS_NICE, so only a process that does nothing
 * else is put there. Linux only (it lists /proc/self/task); elsewhere nothing changes.
 */
export function yieldThisProcess(): Yielded {
  let tasks: string[]
  try {
    tasks = readdirSync('/proc/self/task')
  } catch {
    return 'unchanged'
  }
  const nice = yieldingNice()
  let lowered = false
  for (const task of tasks) {
    try {
      setPriority(Number(task), nice)
      lowered = true
    } catch {
      // Ended meanwhile, or not allowed here (some containers): the class may still be.
    }
  }
  const r = spawnSync('chrt', ['-i', '-a', '-p', '0', String(process.pid)], {
    stdio: 'ignore',
    timeout: 5000,
  })
  if (r.status === 0) return 'idle'
  return lowered ? 'nice' : 'unchanged'
}

/**
 * Lowers every other thread of this process to yieldingNice() of the calling (serving) thread,
 * and returns how many it lowered. Those are V8's platform threads, which run the collections and
 * the optimising compiles of every isolate of the process (the serving thread's concurrent
 * marking, a reload reader's young-generation collections), libuv's pool (DNS lookups, file
 * reads) and Node's own. At the serving thread's priority, four of them busy on a core the
 * gateway is limited to left the serving thread a fifth of it for as long: under load, a reload
 * of 10,000 rules left answers up to 86 ms late, and none over 26 ms with them lowered
 * (bench/README.md §scale).
 * Threads started later take the priority of the thread that starts them. Linux only (it lists
 * /proc/self/task); elsewhere nothing changes.
 */
export async function yieldOtherThreads(): Promise<number> {
  let tasks: string[]
  try {
    // libuv starts its pool's threads, all at once, at the first job it is given, and Node 24
    // loads modules without one: a job first, so that they are there to be lowered.
    tasks = await readdir('/proc/self/task')
  } catch {
    return 0
  }
  const nice = yieldingNice()
  let lowered = 0
  for (const task of tasks) {
    const tid = Number(task)
    // The serving thread's id is the process's.
    if (tid === process.pid) continue
    try {
      // Only ever lowered: a thread already lower (started under `nice`) stays as it is.
      if (getPriority(tid) < nice) {
        setPriority(tid, nice)
        lowered++
      }
    } catch {
      // Ended meanwhile, or not allowed here.
    }
  }
  return lowered
}

/**
 * Lowers a child process that is to yield (a reload's reader) to the lowest nice value as soon as
 * it is forked: it puts itself in the idle class (yieldThisProcess) only once Node has started in
 * it, 56–72 ms of CPU (process.cpuUsage, every thread, at that point) that would otherwise run at
 * the priority of the thread that forked it, the serving thread, on its core. The threads Node
 * starts meanwhile take the lowered value from its main thread. Whether it was lowered (not
 * allowed in some containers: it then lowers itself once started).
 */
export function lowerChild(pid: number): boolean {
  try {
    setPriority(pid, LOWEST)
    return true
  } catch {
    return false
  }
}
