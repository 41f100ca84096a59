import { createHmac, randomUUID } from 'node:crypto'
import {
  McpServer,
  ProtocolError,
  ProtocolErrorCode,
  createMcpHandler,
} from '@modelcontextprotocol/server'
import { request } from 'undici'
import * as z from 'zod'
import { nodeServing } from '../../deploy/demo/serve.js'
import { startRecording, type TestServer } from './sdk-servers.js'

/** The extension's identifier (SEP-3415), as servers advertise it under `capabilities.extensions`. */
export const EVENTS_EXTENSION = 'io.modelcontextprotocol/events'

/** One webhook POST the server sent, and how the receiver answered. */
interface Delivery {
  readonly url: string
  readonly status: number | 'failed'
}

/** An events-capable test server: every event type offers poll, push and webhook delivery. */
export interface EventsTestServer extends TestServer {
  /** Raises an occurrence: streams get it now, polls from their cursor, webhooks by POST. */
  emit(name: string, data: Readonly<Record<string, unknown>>): Promise<void>
  /** events/stream requests still open here. */
  readonly openStreams: number
  /** events/stream requests that ended because the request was aborted (the client went away). */
  readonly abortedStreams: number
  /** Webhook subscriptions registered (events/subscribe), by id. */
  readonly subscriptions: ReadonlyMap<string, { readonly name: string; readonly url: string }>
  readonly deliveries: readonly Delivery[]
}

export interface EventsServerOptions {
  readonly name?: string
  /** The event types listed (default ci.failed, ci.secret_rotated, deploy.done). */
  readonly events?: readonly string[]
  /** A `notifications/events/heartbeat` on every open stream this often (default: none). */
  readonly heartbeatMs?: number
}

const Named = z.looseObject({ name: z.string() })
const Subscribe = z.looseObject({
  name: z.string(),
  delivery: z.looseObject({ url: z.string(), secret: z.string() }),
})

interface Occurrence {
  readonly eventId: string
  readonly name: string
  readonly timestamp: string
  readonly data: Readonly<Record<string, unknown>>
  /** The cursor after it: its index + 1, as text. */
  readonly cursor: string
}

/**
 * Starts a 2026-07-28 server (2025-era requests served statelessly) with the official SDK that
 * implements the events extension with custom request handlers: `events/list`, `events/poll`
 * (cursor = how many occurrences were seen), `events/stream` (a real push stream of
 * `notifications/events/*` until the request is aborted), and `events/subscribe` /
 * `events/unsubscribe` with a real webhook sender signing each POST as Standard Webhooks do
 * (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>`).
 */
export async function startEventsServer(
  options: EventsServerOptions = {},
): Promise<EventsTestServer> {
  const name = options.name ?? 'events-sdk'
  const types = options.events ?? ['ci.failed', 'ci.secret_rotated', 'deploy.done']
  const seen: Occurrence[] = []
  const streams = new Set<(o: Occurrence) => void>()
  const subscriptions = new Map<string, { name: string; url: string; secret: string }>()
  const deliveries: Delivery[] = []
  let aborted = 0
  const known = (event: string): void => {
    // As a server answers a name it does not list (the gateway answers a denied one the same).
    if (!types.includes(event))
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown event: ${event}`)
  }
  const handler = createMcpHandler(
    () => {
      const server = new McpServer(
        { name, version: '1.0.0' },
        { capabilities: { extensions: { [EVENTS_EXTENSION]: {} } } },
      )
      const s = server.server
      s.setRequestHandler('events/list', { params: z.looseObject({}) }, () => ({
        events: types.map((t) => ({
          name: t,
          description: `${t} occurrences`,
          inputSchema: { type: 'object' },
          payloadSchema: { type: 'object' },
          delivery: ['poll', 'push', 'webhook'],
        })),
      }))
      s.setRequestHandler('events/poll', { params: Named }, (params) => {
        known(params.name)
        const from = typeof params['cursor'] === 'string' ? Number(params['cursor']) : 0
        const events = seen.slice(from).filter((o) => o.name === params.name)
        return { events, cursor: String(seen.length), hasMore: false }
      })
      s.setRequestHandler('events/stream', { params: Named }, async (params, ctx) => {
        known(params.name)
        const subscriptionId = randomUUID()
        const meta = { 'io.modelcontextprotocol/subscriptionId': subscriptionId }
        const notify = (method: string, extra: Record<string, unknown>): void =>
          void ctx.mcpReq.notify({ method, params: { _meta: meta, ...extra } }).catch(() => {})
        notify('notifications/events/active', { cursor: String(seen.length) })
        const push = (o: Occurrence): void => {
          if (o.name === params.name)
            notify('notifications/events/event', { event: o, cursor: o.cursor })
        }
        streams.add(push)
        const beat =
          options.heartbeatMs === undefined
            ? undefined
            : setInterval(
                () => notify('notifications/events/heartbeat', { cursor: String(seen.length) }),
                options.heartbeatMs,
              )
        try {
          await new Promise<void>((resolve) => {
            if (ctx.mcpReq.signal.aborted) resolve()
            ctx.mcpReq.signal.addEventListener('abort', () => resolve(), { once: true })
          })
          aborted++
        } finally {
          streams.delete(push)
          clearInterval(beat)
        }
        return {}
      })
      s.setRequestHandler('events/subscribe', { params: Subscribe }, (params) => {
        known(params.name)
        const id = `sub_${randomUUID()}`
        subscriptions.set(id, {
          name: params.name,
          url: params.delivery.url,
          secret: params.delivery.secret,
        })
        return { id, refreshBefore: new Date(Date.now() + 3_600_000).toISOString() }
      })
      s.setRequestHandler('events/unsubscribe', { params: Named }, (params) => {
        known(params.name)
        for (const [id, sub] of subscriptions)
          if (sub.name === params.name) subscriptions.delete(id)
        return {}
      })
      return server
    },
    { legacy: 'stateless', responseMode: 'auto' },
  )
  const node = nodeServing(handler)
  const http = await startRecording(async (req, res, rec) => {
    await node(req, res, rec.body)
  })
  return {
    ...http,
    notify: handler.notify,
    get openStreams() {
      return streams.size
    },
    get abortedStreams() {
      return aborted
    },
    subscriptions,
    deliveries,
    async emit(event, data) {
      const o: Occurrence = {
        eventId: `evt_${randomUUID()}`,
        name: event,
        timestamp: new Date().toISOString(),
        data,
        cursor: String(seen.length + 1),
      }
      seen.push(o)
      for (const push of streams) push(o)
      for (const [id, sub] of subscriptions) {
        if (sub.name !== event) continue
        deliveries.push(await deliver(id, sub, o))
      }
    },
    async close() {
      await handler.close()
      await http.close()
    },
  }
}

/** The Standard Webhooks signature: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`. */
export function webhookSignature(
  secret: string,
  id: string,
  timestamp: string,
  body: string,
): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64')
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`
}

async function deliver(
  subscriptionId: string,
  sub: { readonly url: string; readonly secret: string },
  o: Occurrence,
): Promise<Delivery> {
  const body = JSON.stringify(o)
  const timestamp = String(Math.floor(Date.now() / 1000))
  try {
    const res = await request(sub.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': o.eventId,
        'webhook-timestamp': timestamp,
        'webhook-signature': webhookSignature(sub.secret, o.eventId, timestamp, body),
        'x-mcp-subscription-id': subscriptionId,
      },
      body,
    })
    await res.body.dump()
    return { url: sub.url, status: res.statusCode }
  } catch {
    return { url: sub.url, status: 'failed' }
  }
}
