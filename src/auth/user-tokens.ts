import type { GatewayConfig } from '../config/schema.js'
import type { Principal } from './principal.js'

/**
 * The user's own token at the service behind one server with `userAuth` (docs/auth.md §Per-user
 * credentials): what the endpoint's send needs of it. src/userauth/ implements it; this folder
 * only names it, so that the credentials a server gets stay one lookup (`ServerAuth`), whoever
 * sends (endpoint/exchange.ts).
 */
export interface UserTokenSource {
  /** The service's name, as the connect prompt shows it. */
  readonly service: string
  /**
   * `Bearer <token>` of this caller at this server, refreshed first when it is about to expire;
   * undefined when the caller has not connected (or the stored token was dropped or is unreadable).
   */
  authorization(principal: Principal): Promise<string | undefined>
  /**
   * The server refused `sent` (HTTP 401): one refresh, single flight per user. The new value, or
   * undefined when the token is gone (dropped: the next call asks the user to connect again).
   */
  refused(principal: Principal, sent: string): Promise<string | undefined>
  /** The refreshed token was refused too: it is dropped (`reason` goes to the audit line). */
  drop(principal: Principal, reason: string): Promise<void>
  /**
   * After the user accepted the connect prompt: the token once the connect page stored it, waiting
   * at most `waitMs` (spec 2026-07-28 client/elicitation §URL Mode Flow: the retry may block until
   * the out-of-band interaction is done).
   */
  connected(principal: Principal, waitMs: number): Promise<string | undefined>
  /** The connect page for this caller: a sealed, single-use link, valid ten minutes. */
  connectUrl(principal: Principal): string
  /**
   * The `requestState` of an `input_required` answer (spec 2026-07-28 basic/patterns/mrtr): sealed,
   * bound to the caller, the server and the method, short-lived. Starts with REQUEST_STATE_PREFIX.
   */
  requestState(principal: Principal, method: string): string
  /** Whether `state` is a `requestState` this source issued to this caller for `method`, unexpired. */
  issued(principal: Principal, method: string, state: string): boolean
  /** How long a retry whose user accepted the prompt waits for the connection (`connected`). */
  readonly connectWaitMs: number
}

/** Every `requestState` the gateway issues starts so: the retry's copy is the gateway's, not the server's. */
export const REQUEST_STATE_PREFIX = 'mcp-edge.ua1.'

/** Builds the sources of a config's `userAuth` servers (src/userauth/ `UserAuth`). */
export interface UserTokenProvider {
  sourceFor(server: string, config: GatewayConfig): UserTokenSource
}

/**
 * A `userAuth` server compiled without a token store (a runtime built outside a running gateway):
 * nothing is connected, and a connect link cannot be made, so every request fails closed.
 */
export const NO_USER_TOKENS: UserTokenSource = {
  service: '',
  authorization: () => Promise.resolve(undefined),
  refused: () => Promise.resolve(undefined),
  drop: () => Promise.resolve(),
  connected: () => Promise.resolve(undefined),
  connectUrl: () => {
    throw new Error('userAuth: no user-token store in this process')
  },
  requestState: () => {
    throw new Error('userAuth: no user-token store in this process')
  },
  issued: () => false,
  connectWaitMs: 0,
}
