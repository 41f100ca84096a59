/**
 * Process CPU accounting from /proc: the processes' own utime+stime, so the figure covers every
 * thread (GC, libuv pool) and nothing the load generator does.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, readdirSync } from 'node:fs'

/** Clock ticks per second for /proc/<pid>/stat times (`getconf CLK_TCK`, almost always 100). */
export function clockTicksPerSecond(): number {
  try {
    const value = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim())
    if (Number.isInteger(value) && value > 0) return value
  } catch {
    // getconf missing: fall through to the Linux default.
  }
  return 100
}

/** utime+stime in ticks summed over the given pids; throws if one has exited (a crashed server). */
export function cpuTicks(pids: readonly number[]): number {
  let total = 0
  for (const pid of pids) {
    let fields: string[]
    try {
      fields = statFields(pid)
    } catch {
      throw new Error(`process ${pid} is gone: a server under test crashed or was killed`)
    }
    // proc(5): utime and stime are fields 14 and 15; fields[0] is field 3 (state).
    total += Number(fields[11]) + Number(fields[12])
  }
  return total
}

/**
 * Ticks every CPU of the machine spent busy since boot: /proc/stat's `cpu` line less idle and
 * iowait (proc(5)). With `cpuTicks` of one's own processes it tells how much CPU the rest of the
 * machine took during a measurement.
 */
export function machineBusyTicks(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? ''
  const [, ...fields] = line.trim().split(/\s+/)
  const ticks = fields.map(Number)
  // user nice system idle iowait irq softirq; steal is time the hypervisor gave to other
  // machines, not a process here (guest time is already inside user).
  const total = ticks.slice(0, 7).reduce((a, b) => a + b, 0)
  return total - (ticks[3] ?? 0) - (ticks[4] ?? 0)
}

/** utime+stime in ticks over the given pids that are still alive. */
export function liveCpuTicks(pids: readonly number[]): number {
  let total = 0
  for (const pid of pids) {
    try {
      total += cpuTicks([pid])
    } catch {
      // exited (a short-lived helper such as getconf): its time is no longer anyone's
    }
  }
  return total
}

/** The pid and all its live descendants, in case a server forks workers. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    let fields: string[]
    try {
      fields = statFields(Number(name))
    } catch {
      continue // exited while we were listing
    }
    const ppid = Number(fields[1])
    const siblings = children.get(ppid) ?? []
    siblings.push(Number(name))
    children.set(ppid, siblings)
  }
  const tree = [root]
  for (let i = 0; i < tree.length && tree.length < 1000; i++) {
    tree.push(...(children.get(tree[i] ?? -1) ?? []))
  }
  return tree
}

/** Whether /proc accounting is available (Linux). */
export function hasProcStat(): boolean {
  try {
    statFields(process.pid)
    return true
  } catch {
    return false
  }
}

function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name (field 2) is in parentheses and may itself contain spaces or ')'.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}
