import { createServer, type RequestListener, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A request to the admin listener is a header block and, for a sign-in, a short form: all of it
 * arrives within this long or the connection is answered 408 and closed.
 */
const REQUEST_MS = 5000
/** How often Node looks for requests past REQUEST_MS (its default is every 30 s). */
const CHECK_MS = 500

/**
 * The admin listener's socket: `/metrics`, the status page and /readyz with details, on their own
 * host/port, never on the data plane (clients of the gateway must not read its internals; Envoy
 * edge practice "restrict admin"). What it answers is `listener` (src/status/web/app.ts, on
 * @hono/node-server); this module only binds it, bounds slow clients and closes it.
 */
export async function startAdmin(
  host: string,
  port: number,
  listener: RequestListener,
): Promise<{ readonly port: number; close(): Promise<void> }> {
  const server: Server = createServer(
    {
      // Bounded like the data plane's: a slow client cannot hold the listener's sockets for ever.
      headersTimeout: REQUEST_MS,
      requestTimeout: REQUEST_MS,
      connectionsCheckingInterval: CHECK_MS,
      // SECURITY: never relax llhttp (request smuggling); stated, not defaulted.
      insecureHTTPParser: false,
      // SECURITY: RFC 9112 §3.2: no Host, no request: the Host rule has something to judge.
      requireHostHeader: true,
    },
    listener,
  )
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
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
