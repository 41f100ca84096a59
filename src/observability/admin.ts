import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** Answers a request the admin listener does not know itself; false when it is not one of its. */
export type AdminRoutes = (req: IncomingMessage, res: ServerResponse) => boolean

/**
 * The admin listener: `/metrics` in Prometheus text format on its own host/port, never on the
 * data plane (clients of the gateway must not read its internals; Envoy edge practice "restrict
 * admin"), and whatever `routes` serve (the status page and /readyz with details:
 * docs/operations.md §Status page).
 */
export async function startAdmin(
  registry: { metrics(): Promise<string>; readonly contentType: string },
  host: string,
  port: number,
  routes?: AdminRoutes,
): Promise<{ readonly port: number; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/metrics') {
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': registry.contentType })
          res.end(text)
        },
        () => {
          res.writeHead(500).end()
        },
      )
      return
    }
    if (routes?.(req, res) === true) return
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n')
  })
  // Bounded like the data plane's: a slow client cannot hold the listener's sockets for ever.
  server.headersTimeout = 10_000
  server.requestTimeout = 30_000
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
