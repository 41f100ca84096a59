import { request } from 'undici'
import { isRecord } from '../mcp/jsonrpc.js'
import {
  ListenUnsupported,
  rpcBody,
  rpcHeaders,
  type ListenFilter,
  type UpstreamEndpoint,
} from './discover.js'
import { invalidationOf, type Invalidation } from '../mcp/changes.js'
import { parseJson, SseParser } from './sse.js'

/**
 * One upstream `subscriptions/listen` (subscriptions.mdx): a POST answered by a long-lived SSE
 * stream. `acked` resolves with the honoured filter once `notifications/subscriptions/acknowledged`
 * arrives; change notifications call `onChange`; `ended` resolves when the stream is over, for
 * whatever reason (a final result, an error, close()).
 */
export class ListenStream {
  readonly acked: Promise<ListenFilter>
  readonly ended: Promise<Error | undefined>
  private readonly abort = new AbortController()

  constructor(
    ep: UpstreamEndpoint,
    filter: ListenFilter,
    id: string,
    onChange: (what: Invalidation) => void,
  ) {
    let ack!: (f: ListenFilter) => void
    let nack!: (e: Error) => void
    this.acked = new Promise((resolve, reject) => ((ack = resolve), (nack = reject)))
    this.acked.catch(() => undefined)
    this.ended = this.run(ep, filter, id, onChange, ack).then(
      () => (nack(new Error('listen stream ended before its acknowledgement')), undefined),
      (err: unknown) => {
        const e = err instanceof Error ? err : new Error(String(err))
        nack(e)
        return e
      },
    )
  }

  /** Ends the stream (closing it is how a client cancels a listen; streamable-http §Cancellation). */
  close(): void {
    this.abort.abort(new Error('listen closed'))
  }

  private async run(
    ep: UpstreamEndpoint,
    filter: ListenFilter,
    id: string,
    onChange: (what: Invalidation) => void,
    ack: (f: ListenFilter) => void,
  ): Promise<void> {
    const res = await request(ep.url, {
      method: 'POST',
      headers: rpcHeaders(ep, 'subscriptions/listen'),
      body: rpcBody(id, 'subscriptions/listen', { notifications: filter }),
      dispatcher: ep.dispatcher,
      signal: this.abort.signal,
      headersTimeout: ep.headersTimeoutMs,
      bodyTimeout: ep.bodyTimeoutMs,
    })
    if (
      res.statusCode !== 200 ||
      !/^text\/event-stream\s*(;|$)/i.test(String(res.headers['content-type'] ?? ''))
    ) {
      await res.body.dump()
      throw new ListenUnsupported(
        `subscriptions/listen answered ${res.statusCode} without a stream`,
      )
    }
    const parser = new SseParser()
    for await (const chunk of res.body) {
      for (const data of parser.push(chunk as Buffer)) {
        const msg = parseJson(data)
        if (!isRecord(msg)) continue
        // A response to the listen itself is its graceful end (subscriptions.mdx §Ending).
        if ('result' in msg || 'error' in msg) return
        const params = isRecord(msg.params) ? msg.params : {}
        if (msg.method === 'notifications/subscriptions/acknowledged') {
          ack(isRecord(params.notifications) ? (params.notifications as ListenFilter) : {})
          continue
        }
        const what = invalidationOf(msg.method, params)
        if (what !== undefined) onChange(what)
      }
    }
  }
}
