import type { ServerResponse } from 'node:http'
import type { ForwardRequest, ForwardResult, StreamHead } from './forward-types.js'
import { ProxyHandler } from './proxy-handler.js'

/**
 * Sends one request to `req.upstream` and streams the answer into `res` without buffering (SSE is
 * written event by event as it arrives; spec streamable-http §Sending Messages). Resolves once the
 * response is over, or once a stream's head is written when `req.onStreamEnd` is set (the end is then
 * reported there); rejects with UpstreamFailure only when nothing was written to the client yet.
 * No redirect is ever followed: undici's dispatch follows none unless a redirect interceptor is
 * composed in, and none is (a 3xx is refused in ProxyHandler).
 */
export function forward(
  res: ServerResponse,
  req: ForwardRequest,
): Promise<ForwardResult | StreamHead> {
  return new Promise((resolve, reject) => {
    const handler = new ProxyHandler(res, req, resolve, reject)
    req.upstream.inFlight++
    req.upstream.dispatcher.dispatch(
      {
        origin: req.upstream.origin,
        path: req.upstream.path,
        method: req.method,
        headers: req.headers as string[],
        body: req.body,
        headersTimeout: req.headersTimeoutMs,
        bodyTimeout: req.bodyTimeoutMs,
      },
      handler,
    )
  })
}
