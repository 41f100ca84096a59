import { ALL_METHODS, isStreamMethod, resemblesKnownMethod } from '../mcp/methods.js'

/**
 * Why a `timeouts.methods` key can never set a deadline (docs/balancing.md "Deadlines"), or
 * undefined when it can. Patterns (`resources/*`) are taken as written; an exact key names a
 * request method: never a notification (nothing waits for an answer) nor a long-lived stream
 * (listen and events streams have budgets and an idle timeout instead). A key that only looks like
 * one of the protocol's methods (`Tools/Call`, `tools.call`) is a typo that would silently never
 * match, since names match byte for byte; other names are `extraMethods`.
 */
export function methodKeyProblem(key: string): string | undefined {
  if (key.includes('*')) return undefined
  if (key.startsWith('notifications/')) return 'a notification has no answer to wait for'
  if (isStreamMethod(key)) return 'a long-lived stream has no deadline (streamIdleMs applies)'
  if (!ALL_METHODS.has(key) && resemblesKnownMethod(key))
    return 'not a method name (names match exactly, case included)'
  return undefined
}
