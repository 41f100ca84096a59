import { isRecord } from '../mcp/jsonrpc.js'
import type { ResultHook } from '../mcp/result-transform.js'

/** Tool names kept per server: beyond this, further names count as `other`. */
const MAX_TOOLS_PER_SERVER = 512
/**
 * Longest name kept as a label: the spec's tool-name length (spec 2026-07-28 server/tools §Tool
 * Names, 1-128 characters), well within the bound on exported values (observability/bound.ts).
 */
const MAX_TOOL_NAME = 128
/** A server's tools/list answers are read for names at most this often. */
const LEARN_EVERY_MS = 30_000

/**
 * The tool names each server has listed, so a metric's `gen_ai_tool_name` label comes from a closed
 * set the backends published, never from what a client put in a tools/call (docs/operations.md
 * "Metrics"). Names are learnt from tools/list answers the gateway reads for another feature (cache
 * capture, policy filter), a bounded number per server, and never forgotten (a reload keeps them;
 * a restart relearns them).
 */
export class ToolCatalog {
  private readonly names = new Map<string, Set<string>>()
  private readonly learntAt = new Map<string, number>()

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** The label for a call of `tool` on `server`: the name when listed, else `other`. */
  label(server: string, tool: string): string {
    return this.names.get(server)?.has(tool) === true ? tool : 'other'
  }

  /** A hook reading a tools/list answer, when this server's names are due for a refresh. */
  learner(server: string): ResultHook | undefined {
    const at = this.learntAt.get(server)
    const now = this.now()
    if (at !== undefined && now - at < LEARN_EVERY_MS) return undefined
    this.learntAt.set(server, now)
    return (message) => {
      this.learn(server, message['result'])
      return undefined // only looks
    }
  }

  /** Adds the names of a tools/list result (spec 2026-07-28 server/tools §Listing Tools). */
  learn(server: string, result: unknown): void {
    if (!isRecord(result) || !Array.isArray(result['tools'])) return
    let set = this.names.get(server)
    if (set === undefined) this.names.set(server, (set = new Set()))
    for (const tool of result['tools']) {
      if (set.size >= MAX_TOOLS_PER_SERVER) return
      const name = isRecord(tool) ? tool['name'] : undefined
      if (typeof name === 'string' && name.length > 0 && name.length <= MAX_TOOL_NAME) set.add(name)
    }
  }
}
