import type { ServerResponse } from 'node:http'
import type { AuthRuntime } from '../auth/compile.js'
import type { Principal } from '../auth/principal.js'
import type { ListFilter } from '../mcp/list-filter.js'
import {
  ServerAdmission,
  type AdmitCall,
  type AdmitDeps,
  type AdmitServer,
  type Admission,
} from './admit.js'
import type { EndpointCall } from './call.js'
import { credentialsFor, exchanges, sendAgain, withAuth } from './exchange.js'
import type { PlanOptions, PlanServer } from './plan.js'
import { sendPlanned, type Seen, type Sent } from './send.js'

/** What an endpoint is compiled from (a ServerRuntime has all of it). */
export type EndpointServer = AdmitServer & PlanServer

/** The deciders of one app, and the token exchangers its sends use. */
export interface EndpointDeps extends AdmitDeps {
  readonly auth: AuthRuntime | undefined
}

/** How a request is sent: everything but the credentials, which the endpoint gets itself. */
export type SendOptions = Omit<PlanOptions, 'auth'>

/**
 * One server's endpoint, compiled once per config and app (app.ts): the only way any request
 * reaches that server, with two doors (docs/design/member-path.md): `admit` decides
 * (endpoint/admit.ts) and `send` sends (endpoint/send.ts), for a direct request and for every
 * request a virtual server makes of it as a member alike, so a member is judged, limited, audited
 * and reached by exactly what its own endpoint runs.
 */
export class ServerEndpoint {
  readonly #admission: ServerAdmission
  readonly #auth: AuthRuntime | undefined
  /** Whether its requests carry credentials of their own (`tokenExchange`, `userAuth`). */
  readonly #exchanges: boolean

  constructor(
    readonly server: EndpointServer,
    deps: EndpointDeps,
  ) {
    this.#admission = new ServerAdmission(server, deps)
    this.#auth = deps.auth
    this.#exchanges = exchanges(deps.auth, server.name)
  }

  get name(): string {
    return this.server.name
  }

  /**
   * Admits one request to this server. `endpoint` is where the client sent it: this server, or a
   * virtual server the server is a member of (a 403 challenge names it).
   */
  admit(call: AdmitCall, endpoint: string = this.server.name): Admission | Promise<Admission> {
    return this.#admission.admit(call, endpoint)
  }

  /**
   * Sends an admitted request to this server and its answer into `sink` (the client's response,
   * or a collecting one): the credentials it gets for this server, then the one send
   * (endpoint/send.ts). A caller's token is exchanged per request, never passed through (spec
   * 2026-07-28 security-considerations "Token Passthrough"); costs no await without credentials.
   * With `userAuth` the user's own token goes instead, refreshed once on a 401, and a caller who
   * has not connected is asked to in band (endpoint/exchange.ts `credentialsFor`).
   */
  send(call: EndpointCall, sink: ServerResponse, opts: SendOptions, seen?: Seen): Promise<Sent> {
    if (!this.#exchanges) return sendPlanned(this.server, call, sink, opts, seen)
    return this.#exchanged(call, sink, opts, seen)
  }

  async #exchanged(
    call: EndpointCall,
    sink: ServerResponse,
    opts: SendOptions,
    seen: Seen | undefined,
  ): Promise<Sent> {
    const creds = await credentialsFor(this.#auth, this.server.name, call)
    if (creds.kind === 'answer') return creds
    const send = (auth: string | undefined): Promise<Sent> =>
      sendPlanned(this.server, creds.call, sink, withAuth(opts, auth), seen)
    try {
      return await send(creds.auth)
    } catch (err) {
      return sendAgain(err, creds, send)
    }
  }

  /** The caller's view of this server's lists, as admission gives it to a list request. */
  listView(principal: Principal | undefined): ListFilter | undefined {
    return this.#admission.listView(principal)
  }
}

/** Every server's endpoint, by the server's name. */
export type Endpoints = ReadonlyMap<string, ServerEndpoint>

/** Compiles an endpoint for each server, over one app's deciders. */
export function compileEndpoints(servers: Iterable<EndpointServer>, deps: EndpointDeps): Endpoints {
  const endpoints = new Map<string, ServerEndpoint>()
  for (const server of servers) endpoints.set(server.name, new ServerEndpoint(server, deps))
  return endpoints
}

/** The endpoint of `server`; every server of a runtime has one (compileEndpoints). */
export function endpointOf(endpoints: Endpoints, server: string): ServerEndpoint {
  const endpoint = endpoints.get(server)
  if (endpoint === undefined) throw new Error(`no endpoint compiled for server ${server}`)
  return endpoint
}
