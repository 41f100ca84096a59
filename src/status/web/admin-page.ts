import type { RequestListener } from 'node:http'
import { getRequestListener } from '@hono/node-server'
import { AdminAuth } from '../auth.js'
import { exposureWarnings, isLoopback } from '../exposure.js'
import { StatusService, type StatusSource } from '../service.js'
import { gatewayVersion } from '../version.js'
import { adminApp, type MetricsText } from './app.js'
import type { UserTokensView } from './user-tokens.js'

/** The admin listener's app over one status model, and what stops it. */
export interface StatusPage {
  /** The admin listener's request handler: every route of adminApp, on @hono/node-server. */
  readonly listener: RequestListener
  readonly service: StatusService
  /** A config warning to log at start (docs/operations.md §Status page); empty when none. */
  readonly warnings: readonly string[]
  /** The `admin.token` of a reloaded config: a different one ends every sign-in. */
  setToken(token: string | undefined): void
  close(): void
}

/**
 * Starts the status model over `source` (this process, or a primary's workers) and builds the
 * admin listener's routes for it (docs/operations.md §Status page).
 */
export function createStatusPage(
  source: StatusSource,
  opts: {
    readonly admin: { readonly host: string; readonly token?: string | undefined }
    readonly workers: number
    readonly startedAt: number
    readonly metrics: MetricsText
    /** The clock of sign-in sessions and the sign-in throttle (tests move it). */
    readonly now?: (() => number) | undefined
    /** Users connected to `userAuth` servers, for `/user-tokens`. */
    readonly userTokens?: UserTokensView | undefined
  },
): StatusPage {
  const host = opts.admin.host
  let token = opts.admin.token
  const warnings = exposureWarnings({ host, token })
  const version = gatewayVersion()
  const service = new StatusService(
    source,
    {
      version,
      workers: opts.workers,
      // Read at each document: a reload that sets or drops admin.token changes it.
      get warnings() {
        return exposureWarnings({ host, token })
      },
    },
    opts.startedAt,
  )
  service.start()
  const auth = new AdminAuth(token, opts.now)
  const app = adminApp({
    service,
    auth,
    loopback: isLoopback(host),
    metrics: opts.metrics,
    userTokens: opts.userTokens,
  })
  const listener = getRequestListener(app.fetch, {
    // The data plane's own listener (src/pipeline/node-response.ts) relies on Node's global
    // Request and Response: this adapter must not replace them for the whole process.
    overrideGlobalObjects: false,
    // A request the adapter cannot turn into a URL (a Host that is no authority) never reaches
    // the app; it still gets no body to sniff and nothing to cache.
    errorHandler: () =>
      new Response('bad request\n', {
        status: 400,
        headers: {
          'content-type': 'text/plain; charset=utf-8',
          'x-content-type-options': 'nosniff',
          'cache-control': 'no-store',
        },
      }),
  })
  return {
    listener: (req, res) => void listener(req, res),
    service,
    warnings,
    setToken(next) {
      token = next
      auth.setToken(next)
    },
    close: () => service.close(),
  }
}
