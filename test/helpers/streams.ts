import type { ServerResponse } from 'node:http'
import { request, type Dispatcher } from 'undici'
import { onTestFinished } from 'vitest'
import { mcpBody, mcpHeaders } from './clients.js'
import { closeServer, listenOn } from './tokens.js'

/** The event a backend sends first on a listen stream. */
export const LISTEN_ACK =
  'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}\n\n'

/** A streamed answer held open by the test (subscriptions/listen, a 2025-era GET stream). */
export interface OpenStream {
  readonly status: number
  readonly headers: Record<string, string | string[] | undefined>
  text(): string
  /** Resolves when the response body is over ('error' when it broke or was closed by us). */
  readonly ended: Promise<'end' | 'error'>
  /** The body as JSON, once it ended (for refusals). */
  json(): Promise<Record<string, unknown>>
  /** Closes the stream from the client side. */
  close(): void
}

/** POSTs subscriptions/listen and returns as soon as the response head arrived. */
export async function openListen(
  url: string,
  id: string | number,
  opts: { headers?: Record<string, string>; dispatcher?: Dispatcher } = {},
): Promise<OpenStream> {
  const body = mcpBody('subscriptions/listen', { notifications: { toolsListChanged: true } }, id)
  const res = await request(url, {
    method: 'POST',
    headers: { ...mcpHeaders('subscriptions/listen'), ...opts.headers },
    body: JSON.stringify(body),
    ...(opts.dispatcher !== undefined && { dispatcher: opts.dispatcher }),
  })
  return streamOf(res)
}

export function streamOf(res: Dispatcher.ResponseData): OpenStream {
  let text = ''
  const ended = (async (): Promise<'end' | 'error'> => {
    try {
      for await (const chunk of res.body) text += (chunk as Buffer).toString('utf8')
      return 'end'
    } catch {
      return 'error'
    }
  })()
  const stream: OpenStream = {
    status: res.statusCode,
    headers: res.headers,
    text: () => text,
    ended,
    json: async () => {
      await ended
      return JSON.parse(text) as Record<string, unknown>
    },
    close: () => void res.body.destroy(),
  }
  onTestFinished(() => stream.close())
  return stream
}

/** A backend that acknowledges every listen stream and holds it open until the test ends it. */
export async function heldStreamsBackend(): Promise<{ url: string; held: ServerResponse[] }> {
  const held: ServerResponse[] = []
  const { server, url } = await listenOn((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write(LISTEN_ACK)
    held.push(res)
  })
  onTestFinished(() => {
    server.closeAllConnections()
    return closeServer(server)
  })
  return { url: `${url}/mcp`, held }
}
