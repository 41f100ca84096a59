const MAX_HELD = 64 * 1024

/**
 * A 5xx answer held back before anything is written (ProxyHandler holds every 5xx), to tell a
 * backend's own JSON-RPC error, which is relayed as is, from a proxy page or an empty body, which
 * is the replica failing (docs/balancing.md §Retries).
 */
export class HeldBody {
  private readonly chunks: Buffer[] = []
  private size = 0

  /** Keeps a chunk; false once the body is larger than anything worth inspecting (64 KiB). */
  push(chunk: Buffer): boolean {
    this.size += chunk.length
    if (this.size > MAX_HELD) return false
    this.chunks.push(chunk)
    return true
  }

  /** The whole body when it is one JSON-RPC message, else undefined. */
  message(): Buffer | undefined {
    const body = Buffer.concat(this.chunks, this.size)
    try {
      const v: unknown = JSON.parse(body.toString('utf8'))
      const ok =
        typeof v === 'object' && v !== null && (v as { jsonrpc?: unknown }).jsonrpc === '2.0'
      return ok ? body : undefined
    } catch {
      return undefined
    }
  }
}
