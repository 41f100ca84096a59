import type { AdminRoutes } from '../observability/admin.js'
import { AdminAuth } from './auth.js'
import { exposureWarnings, isLoopback } from './exposure.js'
import { statusRoutes } from './routes.js'
import { StatusService, type StatusSource } from './service.js'
import { gatewayVersion } from './version.js'

/** The status page of one admin listener: its routes, and what stops it. */
export interface StatusPage {
  readonly routes: AdminRoutes
  readonly service: StatusService
  /** A config warning to log at start (docs/operations.md §Status page); empty when none. */
  readonly warnings: readonly string[]
  close(): void
}

/**
 * Starts the status model over `source` (this process, or a primary's workers) and returns the
 * admin listener's routes for it (docs/operations.md §Status page).
 */
export function createStatusPage(
  source: StatusSource,
  opts: {
    readonly admin: { readonly host: string; readonly token?: string | undefined }
    readonly workers: number
    readonly startedAt: number
  },
): StatusPage {
  const warnings = exposureWarnings(opts.admin)
  const service = new StatusService(
    source,
    { version: gatewayVersion(), workers: opts.workers, warnings },
    opts.startedAt,
  )
  service.start()
  const routes = statusRoutes({
    service,
    auth: new AdminAuth(opts.admin.token),
    loopback: isLoopback(opts.admin.host),
  })
  return { routes, service, warnings, close: () => service.close() }
}
