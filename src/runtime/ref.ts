import type { GatewayRuntime } from './runtime.js'

/** Holder of the live runtime; a reload swaps `current` and in-flight requests keep theirs. */
export interface RuntimeRef {
  current: GatewayRuntime
  /** Set on SIGTERM: new requests get 503 while in-flight ones finish. */
  draining: boolean
}
