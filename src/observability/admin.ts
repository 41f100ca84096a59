import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * The admin listener: `/metrics` in Prometheus text format on its own host/port, never on the
 * data plane (clients of the gateway must not read its internals; Envoy edge practice "restrict
 * admin").
 */
export async function startAdmin(
  registry: { metrics(): Promise<string>; readonly contentType: string },
  host: string,
  port: number,
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
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n')
  })
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
