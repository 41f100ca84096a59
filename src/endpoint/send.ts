import type { ServerResponse } from 'node:http'
import { sendWithRetries } from '../upstream/attempts.js'
import type { ForwardResult, StreamHead } from '../upstream/forward-types.js'
import type { StreamStop } from '../upstream/lifecycle.js'
import type { Upstream } from '../upstream/upstream.js'
import type { EndpointCall } from './call.js'
import { planAttempt, type PlanOptions, type PlanServer } from './plan.js'

/** A send's answer once over: how the replica's answer ended (upstream/forward-types.ts). */
export type Finished = ForwardResult

/** What a send tells its caller of the replica it last tried, however the send ends. */
export interface Seen {
  upstream: Upstream | undefined
}

/** How a request to a server ended, as far as the send can tell. */
export type Sent =
  /** The gateway answered it in the server's name (a JSON-RPC body on HTTP 200). */
  | { readonly kind: 'answer'; readonly outcome: string; readonly body: string }
  /**
   * The server's answer was written to the sink: to its end, or, for a long-lived stream sent
   * with `onStreamEnd`, to its head (result `streaming`); `upstream` is the replica that answered.
   */
  | {
      readonly kind: 'sent'
      readonly result: ForwardResult | StreamHead
      readonly upstream: Upstream | undefined
    }

/**
 * The one send of a request to a server, whoever sends it (a direct request, a virtual server's
 * member request, the gateway's own reads): the plan (endpoint/plan.ts), the attempt loop over the
 * server's replicas (upstream/attempts.ts), and the books they open: a long-lived stream's slot in
 * its caller's stream budget is given back however the request ends, at the stream's end when it
 * outlives the loop (`onStreamEnd`). Nothing else in the gateway calls the attempt loop (lint:
 * eslint.config.js), so no caller can forget a part of it.
 */
export async function sendPlanned(
  server: PlanServer,
  call: EndpointCall,
  sink: ServerResponse,
  opts: PlanOptions,
  /** Told the replica last tried, however the send ends (an access line names it on failure). */
  seen?: Seen,
): Promise<Sent> {
  const lifecycle = server.balancing.lifecycle
  const end = opts.onStreamEnd
  // The plan opens the stream slot (endpoint/plan.ts); the send gives it back.
  const books: { stop: StreamStop | undefined } = { stop: undefined }
  // A stream that outlives the loop gives its slot back when it ends; made only for streams.
  const planned = planAttempt(
    server,
    call,
    end === undefined
      ? opts
      : {
          ...opts,
          onStreamEnd: (result) => {
            if (books.stop !== undefined) lifecycle.closeStream(books.stop)
            end(result)
          },
        },
  )
  if (planned.kind === 'answer') return planned
  let plan = planned.plan
  const stop = plan.stop
  books.stop = stop
  let streaming = false
  try {
    if (opts.prepare !== undefined) plan = await opts.prepare(plan)
    const result = await sendWithRetries(sink, server.balancing, plan)
    streaming = result.kind === 'streaming'
    return { kind: 'sent', result, upstream: plan.upstream }
  } finally {
    if (seen !== undefined) seen.upstream = plan.upstream
    // SECURITY: the caller's stream budget gets its slot back however the request ended, so
    // failed or finished streams cannot use it up (docs/balancing.md "Streams").
    if (stop !== undefined && !streaming) lifecycle.closeStream(stop)
  }
}

/** The outcome a send's result is logged and counted as. */
export function outcomeOf(result: ForwardResult | StreamHead): string {
  return result.kind === 'done' ? 'ok' : result.kind
}
