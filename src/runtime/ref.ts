import type { Lifecycle } from '../upstream/lifecycle.js'
import type { GatewayRuntime } from './runtime.js'

/** Holder of the live runtime; a reload swaps `current` and in-flight requests keep theirs. */
export interface RuntimeRef {
  current: GatewayRuntime
  /**
   * What outlives every runtime: requests in progress, open streams, and the one drain flag
   * (`lifecycle.draining`, set on SIGTERM: new requests get 503 while in-flight ones finish).
   */
  readonly lifecycle: Lifecycle
}
