/** The slice of autocannon 9's programmatic API the bench uses (the package ships no types). */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events'

  interface Options {
    url: string
    method?: string
    headers?: Record<string, string>
    body?: string
    connections?: number
    pipelining?: number
    duration?: number
    sampleInt?: number
    timeout?: number
  }

  /** Emits 'response' (client, statusCode, resBytes, responseTimeMs) and 'reqError' (error). */
  export interface Instance extends EventEmitter {
    stop(): void
  }

  function autocannon(opts: Options, done: (err: Error | null, result: unknown) => void): Instance
  export default autocannon
}
