import { createHmac, KeyObject, sign as signRaw } from 'node:crypto'
import { createServer, type RequestListener, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  exportJWK,
  exportSPKI,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose'

/** A signing key pair with its public JWK (kid and alg set), as an IdP would publish it. */
export interface TestKey {
  readonly alg: 'RS256' | 'ES256'
  readonly kid: string
  readonly privateKey: CryptoKey
  readonly publicKey: CryptoKey
  readonly jwk: JWK
  /** SPKI PEM of the public key (for publicKeyFile, and the HS256-with-public-key attack). */
  readonly pem: string
}

let keyCounter = 0

/** Generates a real RSA (RS256) or EC P-256 (ES256) key pair with jose. */
export async function generateTestKey(alg: 'RS256' | 'ES256', kid?: string): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true })
  const id = kid ?? `${alg.toLowerCase()}-${++keyCounter}`
  const jwk = { ...(await exportJWK(publicKey)), kid: id, alg, use: 'sig' }
  return { alg, kid: id, privateKey, publicKey, jwk, pem: await exportSPKI(publicKey) }
}

/** Every token minted in this process, so a test can prove none of them reached a backend. */
export const mintedTokens = new Set<string>()

/** Ways {@link mintToken} can build a token no verifier should accept. */
type Attack =
  /** `alg: none`, empty signature. */
  | 'alg-none'
  /** HS256 whose HMAC key is the victim's RSA public key PEM (algorithm confusion). */
  | 'hs256-public-key'
  /** Signed with `key`, which it also embeds as the `jwk` header. */
  | 'embedded-jwk'

/** Options of {@link mintToken}. */
export interface MintOptions {
  /** Signing key (its kid goes into the header unless `kid` says otherwise). */
  readonly key: TestKey
  /** Header kid override; null leaves kid out. */
  readonly kid?: string | null
  /** Extra protected-header fields (jku, x5u, crit …); signed raw, so jose cannot object. */
  readonly header?: Readonly<Record<string, unknown>>
  readonly attack?: Attack
  /** Pads the claims with filler until the token is at least this many characters. */
  readonly minLength?: number
}

/**
 * Signs `claims` exactly as given (no defaults: tests that want `exp` set it). Tokens with extra
 * header fields or attacks are assembled by hand, because jose refuses to produce them.
 */
export async function mintToken(claims: JWTPayload, opts: MintOptions): Promise<string> {
  const payload = opts.minLength === undefined ? claims : padClaims(claims, opts.minLength)
  const kid = opts.kid === undefined ? opts.key.kid : opts.kid
  const kidHeader = kid === null ? {} : { kid }
  let token: string
  if (opts.attack === 'alg-none') {
    token = `${signingInput({ alg: 'none', typ: 'JWT', ...kidHeader }, payload)}.`
  } else if (opts.attack === 'hs256-public-key') {
    const input = signingInput({ alg: 'HS256', typ: 'JWT', ...kidHeader }, payload)
    token = `${input}.${createHmac('sha256', opts.key.pem).update(input).digest('base64url')}`
  } else if (opts.attack === 'embedded-jwk' || opts.header !== undefined) {
    if (opts.key.alg !== 'RS256') throw new Error('raw signing is implemented for RS256 keys')
    const header = {
      alg: 'RS256',
      typ: 'JWT',
      ...kidHeader,
      ...(opts.attack === 'embedded-jwk' && { jwk: publicOnly(opts.key.jwk) }),
      ...opts.header,
    }
    const input = signingInput(header, payload)
    const sig = signRaw('sha256', Buffer.from(input), KeyObject.from(opts.key.privateKey))
    token = `${input}.${sig.toString('base64url')}`
  } else {
    token = await new SignJWT(payload)
      .setProtectedHeader({ alg: opts.key.alg, typ: 'JWT', ...kidHeader })
      .sign(opts.key.privateKey)
  }
  mintedTokens.add(token)
  return token
}

/** Standard access-token claims for `aud`, valid for `ttlSec` (negative = already expired). */
export function claimsFor(
  iss: string,
  aud: string | string[],
  extra: JWTPayload = {},
  ttlSec = 300,
): JWTPayload {
  const now = Math.floor(Date.now() / 1000)
  return { iss, aud, sub: 'alice', iat: now, exp: now + ttlSec, ...extra }
}

/** What the JWKS server does with the next requests. */
export type JwksMode =
  | 'ok'
  | 'error500'
  | 'reset'
  | 'hang'
  | 'garbage'
  | 'html'
  | 'redirect'
  /** 200 with a valid JWK Set that never ends: 256 MiB of whitespace, chunked. */
  | 'huge'
  /** The same, with `Content-Length` declaring all 256 MiB up front. */
  | 'huge-declared'
  /** 200 and the start of a JWK Set, then nothing: the body never completes. */
  | 'stall-body'

/** How much the `huge` modes offer to send. */
export const HUGE_BYTES = 256 * 1024 * 1024

/** A local JWKS endpoint that counts its hits and can rotate keys or fail on demand. */
export interface JwksServer {
  readonly url: string
  /** Requests received (each is one fetch by the gateway). */
  readonly hits: number
  /** Request paths, in order (a followed redirect would show up as /elsewhere.json). */
  readonly paths: readonly string[]
  /** Body bytes the `huge` modes got written into the socket. */
  readonly bytesSent: number
  /** Responses whose connection closed before the whole body was sent. */
  readonly abandoned: number
  setKeys(keys: readonly TestKey[]): void
  setMode(mode: JwksMode): void
  /** Where the `redirect` mode points (default: /elsewhere.json on this server). */
  redirectTo(location: string): void
  /** Extra headers on every good answer (e.g. Cache-Control, Age). */
  setHeaders(headers: Readonly<Record<string, string>>): void
  close(): Promise<void>
}

/** Starts a JWKS endpoint on 127.0.0.1:0 serving `keys` at /jwks.json. */
export async function startJwks(keys: readonly TestKey[]): Promise<JwksServer> {
  let current = keys
  let mode: JwksMode = 'ok'
  let location = '/elsewhere.json'
  let hits = 0
  let extra: Readonly<Record<string, string>> = {}
  let bytesSent = 0
  let abandoned = 0
  const paths: string[] = []
  const { server, url } = await listenOn((req, res) => {
    hits++
    paths.push(req.url ?? '')
    res.on('close', () => void (res.writableFinished || abandoned++))
    if (mode === 'huge' || mode === 'huge-declared') {
      const length = mode === 'huge-declared' ? { 'content-length': String(HUGE_BYTES) } : {}
      res.writeHead(200, { 'content-type': 'application/json', ...length })
      return void streamHuge(res, `{"keys":${JSON.stringify(current.map((k) => k.jwk))}`, (n) => {
        bytesSent += n
      })
    }
    if (mode === 'stall-body') {
      return void res.writeHead(200, { 'content-type': 'application/json' }).write('{"keys":[')
    }
    if (mode === 'reset') return void req.socket.destroy()
    if (mode === 'hang') return
    if (mode === 'error500') return void res.writeHead(500).end('oops')
    if (mode === 'redirect') return void res.writeHead(302, { location }).end()
    if (mode === 'html')
      return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>')
    if (mode === 'garbage')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys": 5}')
    res.writeHead(200, { 'content-type': 'application/json', ...extra })
    res.end(JSON.stringify({ keys: current.map((k) => k.jwk) }))
  })
  return {
    url: `${url}/jwks.json`,
    get hits() {
      return hits
    },
    paths,
    get bytesSent() {
      return bytesSent
    },
    get abandoned() {
      return abandoned
    },
    setKeys: (next) => void (current = next),
    setMode: (next) => void (mode = next),
    redirectTo: (next) => void (location = next),
    setHeaders: (next) => void (extra = next),
    close: () => closeServer(server),
  }
}

/**
 * Writes `head`, then whitespace up to HUGE_BYTES and a closing brace, honouring backpressure so
 * `sent` counts only what the reader let through (plus socket buffers). Stops when the reader goes.
 */
export function streamHuge(res: ServerResponse, head: string, sent: (n: number) => void): void {
  const chunk = Buffer.alloc(64 * 1024, 0x20)
  let left = HUGE_BYTES - head.length - 1
  res.write(head)
  const pump = (): void => {
    while (left > 0 && !res.destroyed) {
      const piece = left >= chunk.length ? chunk : chunk.subarray(0, left)
      left -= piece.length
      sent(piece.length)
      if (!res.write(piece)) return void res.once('drain', pump)
    }
    if (!res.destroyed) res.end('}')
  }
  pump()
}

/** A clock the test moves by hand (the gateway's auth reads it instead of Date.now). */
export interface ManualClock {
  readonly now: () => number
  advance(ms: number): void
}

export function manualClock(start = Date.now()): ManualClock {
  let t = start
  return { now: () => t, advance: (ms) => void (t += ms) }
}

/** A server that must never be contacted (jku / x5u targets); counts connections and requests. */
export interface TrapServer {
  readonly url: string
  readonly hits: number
  close(): Promise<void>
}

/** Starts a trap on 127.0.0.1:0; any connection at all counts as a hit. */
export async function startTrap(): Promise<TrapServer> {
  let hits = 0
  const { server, url } = await listenOn((_req, res) => void res.writeHead(500).end())
  server.on('connection', () => void hits++)
  return {
    url: `${url}/jwks.json`,
    get hits() {
      return hits
    },
    close: () => closeServer(server),
  }
}

/** Listens on 127.0.0.1:0 and resolves once bound. */
export async function listenOn(handler: RequestListener): Promise<{ server: Server; url: string }> {
  const server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

/** Closes a server and every socket it holds (hung requests included). */
export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections()
  })
}

function padClaims(claims: JWTPayload, minLength: number): JWTPayload {
  // base64url grows 4/3; the header and signature add a few hundred characters more.
  return { ...claims, filler: 'x'.repeat(Math.ceil((minLength * 3) / 4)) }
}

function publicOnly(jwk: JWK): JWK {
  const { kty, n, e, crv, x, y } = jwk
  return Object.fromEntries(
    Object.entries({ kty, n, e, crv, x, y }).filter(([, v]) => v !== undefined),
  )
}

/** `base64url(header).base64url(payload)`, the JWS signing input (RFC 7515 §5.1). */
function signingInput(header: object, payload: object): string {
  return `${b64(JSON.stringify(header))}.${b64(JSON.stringify(payload))}`
}

function b64(s: string): string {
  return Buffer.from(s).toString('base64url')
}
