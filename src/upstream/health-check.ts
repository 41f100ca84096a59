import { Client } from 'undici'
import type { Upstream } from './upstream.js'
import { modernEnvelope, outboundHeaders } from '../mcp/outbound.js'

/** `healthCheck:` of a server (defaults in config/schema.ts; docs/balancing.md §Health). */
export interface HealthCheckSettings {
  readonly intervalMs: number
  readonly timeoutMs: number
  readonly unhealthyAfter: number
  readonly healthyAfter: number
}

// `ping` was removed in 2026-07-28; `server/discover` is the method every server MUST implement
// (changelog major 3), so it is the probe. Modern headers and envelope (SEP-2243, SEP-2575).
const DISCOVER = JSON.stringify({
  jsonrpc: '2.0',
  id: 'mcp-edge-health',
  method: 'server/discover',
  // A name of its own: a backend's logs tell probes from the gateway's other requests.
  params: { _meta: modernEnvelope({ name: 'mcp-edge-health', version: '1' }) },
})
const MAX_BODY = 64 * 1024

/**
 * Active health check of one replica: a `server/discover` POST every `intervalMs` on its own
 * connection (so a replica at maxInFlight is not also marked down for being busy). Healthy = a 2xx,
 * or a 4xx carrying a JSON-RPC error: a 2025-era backend answers a modern probe that way
 * (spec 2025-11-25 basic/transports §Protocol Version Header: 400 for a version it does not
 * support) and is alive. Anything else, or no answer in `timeoutMs`, fails.
 */
export class ActiveHealthCheck {
  private readonly client: Client
  private readonly headers: string[]
  private timer: NodeJS.Timeout | undefined
  private closed = false

  constructor(
    private readonly upstream: Upstream,
    private readonly settings: HealthCheckSettings,
    /** The server's static upstream headers, [name, value, …]. */
    staticHeaders: readonly string[],
    /** Called after each probe's result is applied (workers share it, upstream/health-share.ts). */
    private readonly onResult?: () => void,
  ) {
    this.client = new Client(upstream.origin, { connect: { timeout: settings.timeoutMs } })
    this.headers = outboundHeaders(staticHeaders, { http: 'POST', method: 'server/discover' })
  }

  /** Runs the first check now, then one every interval (never two at once). */
  start(): void {
    void this.run()
  }

  /** Stops checking and closes the check connection. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearTimeout(this.timer)
    await this.client.destroy()
  }

  private async run(): Promise<void> {
    const why = await this.probe()
    if (this.closed) return
    if (why === undefined) this.upstream.health.checkPassed()
    else this.upstream.health.checkFailed(why)
    this.onResult?.()
    this.timer = setTimeout(() => void this.run(), this.settings.intervalMs)
    this.timer.unref()
  }

  /** undefined when healthy, else a reason without addresses (safe for /readyz and logs). */
  private async probe(): Promise<string | undefined> {
    const ms = this.settings.timeoutMs
    try {
      const res = await this.client.request({
        path: this.upstream.path,
        method: 'POST',
        headers: this.headers,
        body: DISCOVER,
        signal: AbortSignal.timeout(ms),
        headersTimeout: ms,
        bodyTimeout: ms,
        reset: true, // a fresh connection each time also proves the replica still accepts them
      })
      const status = res.statusCode
      if (status >= 200 && status < 300) {
        await res.body.dump({ limit: MAX_BODY })
        return undefined
      }
      const text = await readCapped(res.body)
      if (status >= 400 && status < 500 && isJsonRpc(text)) return undefined
      return `status ${status}`
    } catch (err) {
      const e = err as { code?: unknown; name?: unknown }
      return typeof e.code === 'string' ? e.code : String(e.name ?? 'error')
    }
  }
}

async function readCapped(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += chunk.length
    if (size > MAX_BODY) {
      body.destroy()
      break
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}

function isJsonRpc(text: string): boolean {
  try {
    const v: unknown = JSON.parse(text)
    return typeof v === 'object' && v !== null && (v as { jsonrpc?: unknown }).jsonrpc === '2.0'
  } catch {
    return false
  }
}
