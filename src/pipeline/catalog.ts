import type { MiddlewareHandler } from 'hono'
import type { GatewayEnv } from './env.js'
import { callNameOf, rewriteCall, withMcpName } from '../catalog/call.js'
import { CATALOG_LISTS } from '../catalog/curate.js'
import { judgeCall } from '../catalog/probe.js'
import { encodeHeaderValue } from '../mcp/headers.js'
import { peekRawId } from '../mcp/jsonrpc.js'
import { renderDenial } from '../policy/denial.js'

/**
 * The catalog view (docs/catalog.md): lists get the server's curated view (the authorize stage
 * puts the caller's policy filter before it); a tool or prompt name is resolved to the backend's
 * own name before policy judges it, and the body and `Mcp-Name` are rewritten to that name. A
 * hidden, renamed-away, drifted or unpinned name is answered as the server answers an unknown one,
 * and nothing is forwarded. Mounted only when a server has curation or `pinning:` is set.
 */
export const catalogView = (): MiddlewareHandler<GatewayEnv> =>
  async function catalogView(c, next) {
    const server = c.get('server')
    const catalog = server.catalog
    if (catalog === undefined) return next()
    const mcp = c.get('mcp')
    const method = mcp.method
    // A skill or a skill's file (catalog/skills.ts): hidden or unreviewed ones are unknown, a
    // pinned file's bytes are checked on the answer.
    const skill = catalog.skills.decide(method, mcp.targets)
    if (skill !== undefined && 'refuse' in skill) {
      c.set('outcome', 'catalog_skill')
      if (mcp.kind === 'notification') return c.body(null, 202)
      const rawId = mcp.message?.rawId ?? peekRawId(c.get('body'))
      const body = renderDenial(skill.refuse, rawId ?? 'null')
      return c.body(body, 200, { 'content-type': 'application/json' })
    }
    if (skill !== undefined) {
      c.set('listFilter', skill.check)
      return next()
    }
    if (method !== undefined && Object.hasOwn(CATALOG_LISTS, method)) {
      c.set('listFilter', catalog)
      return next()
    }
    const call = callNameOf(method, mcp.targets)
    if (call === undefined) return next()
    const maxBytes = c.get('runtime').config.limits.maxInspectBytes
    const verdict = await judgeCall(server, catalog, call, maxBytes)
    const rawId = mcp.message?.rawId ?? peekRawId(c.get('body'))
    // The client's own name in every answer: a backend name it was not shown is never revealed.
    const unknown = renderDenial({ kind: call.target, name: call.exposed }, rawId ?? 'null')
    if ('refused' in verdict) {
      c.set('outcome', `catalog_${verdict.refused}`)
      // A notification gets no answer (JSON-RPC 2.0 §4.1), and nothing is forwarded.
      if (mcp.kind === 'notification') return c.body(null, 202)
      return c.body(unknown, 200, { 'content-type': 'application/json' })
    }
    const backend = verdict.backend
    if (backend === call.exposed) return next()
    const message = mcp.message
    // SECURITY: runtime.ts makes these bodies parsed for a server with a catalog; a name taken
    // from a header alone is never rewritten.
    if (message === undefined) throw new Error('catalog: a named request reached it unparsed')
    const rewritten = rewriteCall(c.get('body'), message, call, backend)
    c.set('body', rewritten.body)
    c.set('mcp', { ...mcp, message: rewritten.message, targets: rewritten.targets })
    const head = c.get('head')
    // SECURITY: classify verified that Mcp-Name and the body name agree; both now name `backend`,
    // so the backend's own header check (HeaderMismatch) still holds.
    if (call.header && head.name !== undefined)
      c.set('head', {
        ...head,
        name: encodeHeaderValue(backend),
        forward: withMcpName(head.forward, backend),
      })
    await next()
    // A policy denial of the backend name answers with the name the client used.
    if (c.get('outcome') === 'policy_denied' && mcp.kind !== 'notification')
      c.res = c.body(unknown, 200, { 'content-type': 'application/json' })
  }
