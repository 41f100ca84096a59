import { REQUEST_STATE_PREFIX } from '../auth/user-tokens.js'
import { open, randomId, seal, type UserKeys } from './seal.js'

/** How long a connect link, and the flow it starts, may be used (docs/auth.md §The connect page). */
const LINK_TTL_MS = 10 * 60_000

/** Who a connect link is for: sealed into it, so nothing in the URL can be changed or read. */
export interface LinkState {
  readonly iss: string
  readonly sub: string
  readonly server: string
  /** Epoch ms. */
  readonly exp: number
  /** Makes the link single use: marked used in the store when it is opened. */
  readonly id: string
}

/**
 * The `state` of a connect link (spec 2026-07-28 client/elicitation §Phishing: the connect URL
 * must let the gateway check that whoever opens it is the user it was made for, and resist
 * changes to it): AES-256-GCM over the issuer, subject, server, expiry and a random id. The URL
 * carries no credential and names nobody readably (§Safe URL Handling).
 */
export function sealLink(keys: UserKeys, iss: string, sub: string, server: string, now: number) {
  const state: LinkState = { iss, sub, server, exp: now + LINK_TTL_MS, id: randomId() }
  return { state, sealed: seal(keys.links, 'link', JSON.stringify(state)) }
}

/** The link's state, or why it cannot be used; never throws on what a browser sends. */
export function openLink(
  keys: UserKeys,
  sealed: string,
  server: string,
  now: number,
): LinkState | 'invalid' | 'expired' {
  const text = open(keys.links, 'link', sealed)
  if (text === undefined) return 'invalid'
  const s = parse(text)
  if (
    s === undefined ||
    typeof s['iss'] !== 'string' ||
    typeof s['sub'] !== 'string' ||
    typeof s['id'] !== 'string' ||
    typeof s['exp'] !== 'number'
  )
    return 'invalid'
  // SECURITY: a link is for one server; the path must name the server it was made for.
  if (s['server'] !== server) return 'invalid'
  if (now >= s['exp']) return 'expired'
  return { iss: s['iss'], sub: s['sub'], server, exp: s['exp'], id: s['id'] }
}

/**
 * The `requestState` of an `input_required` answer (spec 2026-07-28 basic/patterns/mrtr §Server
 * Requirements): sealed, with the principal, the server, the method and a short expiry. It decides
 * nothing (whether a token is stored does), so one that does not open is simply not the gateway's.
 */
export function sealRequestState(
  keys: UserKeys,
  iss: string,
  sub: string,
  server: string,
  method: string,
  now: number,
): string {
  const body = JSON.stringify({ iss, sub, server, method, exp: now + LINK_TTL_MS })
  return REQUEST_STATE_PREFIX + seal(keys.links, 'request-state', body)
}

/** Whether `state` is one this gateway sealed for this caller, server and method, unexpired. */
export function checkRequestState(
  keys: UserKeys,
  state: string,
  iss: string,
  sub: string,
  server: string,
  method: string,
  now: number,
): boolean {
  if (!state.startsWith(REQUEST_STATE_PREFIX)) return false
  const text = open(keys.links, 'request-state', state.slice(REQUEST_STATE_PREFIX.length))
  const s = text === undefined ? undefined : parse(text)
  // SECURITY: state presented by another principal, for another server or method, or late, is
  // not taken for an answer to the gateway's prompt (spec 2026-07-28 basic/patterns/mrtr).
  return (
    s !== undefined &&
    s['iss'] === iss &&
    s['sub'] === sub &&
    s['server'] === server &&
    s['method'] === method &&
    typeof s['exp'] === 'number' &&
    now < s['exp']
  )
}

/** One step of a connect flow in progress, kept in the store under a random id (its `state`). */
export interface FlowState {
  /** `login`: signing in at the gateway's issuer; `service`: authorizing at the service's AS. */
  readonly phase: 'login' | 'service'
  readonly iss: string
  readonly sub: string
  readonly server: string
  /** RFC 7636 verifier of this step's authorization request. */
  readonly verifier: string
  /** OpenID Connect nonce of the sign-in (phase `login`). */
  readonly nonce?: string | undefined
  /** SHA-256 of the browser cookie the flow is bound to. */
  readonly browser: string
  readonly exp: number
}

/** Store names of flows in progress and of used links. */
export const flowName = (id: string): string => `f:${id}`
export const usedName = (id: string): string => `u:${id}`

export function sealFlow(keys: UserKeys, id: string, flow: FlowState): string {
  return seal(keys.links, flowName(id), JSON.stringify(flow))
}

export function openFlow(keys: UserKeys, id: string, sealed: string): FlowState | undefined {
  const text = open(keys.links, flowName(id), sealed)
  const f = text === undefined ? undefined : parse(text)
  if (f === undefined || (f['phase'] !== 'login' && f['phase'] !== 'service')) return undefined
  return f as unknown as FlowState
}

function parse(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text)
    return typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : undefined
  } catch {
    return undefined
  }
}
