import { isRecord } from '../mcp/jsonrpc.js'
import { RESULT_ARRAYS, RESULT_OBJECTS } from '../mcp/methods.js'
import type { CacheEntry } from './entry.js'

/**
 * The shared tier's wire form of an entry, and the checks a value passes before it is trusted.
 * Whoever can write to Redis can put bytes in front of every replica, so a value read back is
 * held to what the gateway itself would have stored from a backend answer (policy.ts decideStore,
 * entry.ts createEntry), never less: docs/cache.md §Shared tier.
 */

/** What a value must be to answer one request. */
export interface SharedExpectation {
  /** The key the value was read under; it must have been written for exactly this key. */
  readonly key: string
  /** Public key → a public entry; private key → a private one. */
  readonly scope: 'public' | 'private'
  readonly server: string
  readonly method: string
  readonly uri: string | undefined
  /** This gateway's cache.maxTtlMs: no entry is fresh here for longer, whoever wrote it. */
  readonly maxTtlMs: number
}

/** A value that passed, or why it did not. */
export type SharedRead = { readonly entry: CacheEntry } | { readonly rejected: string }

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * One JSON header line, then the result bytes. Age travels as the value's Redis lifetime (`pxMs`,
 * compared with PTTL on read), so replicas need no shared clock.
 */
export function encodeEntry(entry: CacheEntry, pxMs: number): Buffer {
  const head = {
    v: 1,
    key: entry.key,
    server: entry.server,
    method: entry.method,
    uri: entry.uri ?? null,
    scope: entry.scope,
    ttlMs: entry.ttlMs,
    lifeMs: entry.lifeMs,
    pxMs,
    bytes: entry.result.length,
  }
  return Buffer.concat([Buffer.from(`${JSON.stringify(head)}\n`), entry.result])
}

/**
 * Reads a shared-tier value back, given its remaining Redis lifetime `pttl`, checking it against
 * what the request expects. The result must be exactly the bytes createEntry writes for a
 * storable answer: one JSON object, re-serialised identically, `resultType: "complete"`, the
 * entry's own scope, the method's array, and no `ttlMs` (a hit splices in its own).
 */
export function decodeShared(
  value: Buffer,
  want: SharedExpectation,
  pttl: number,
  now: number,
): SharedRead {
  const nl = value.indexOf(0x0a)
  if (nl <= 0) return reject('no header line')
  let head: unknown
  try {
    head = JSON.parse(value.subarray(0, nl).toString('utf8'))
  } catch {
    return reject('header is not JSON')
  }
  if (!isRecord(head) || head.v !== 1) return reject('unknown header version')
  // SECURITY: a value is only ever served for the key, server, method and URI it was written for.
  if (head.key !== want.key) return reject('written for another key')
  if (head.server !== want.server || head.method !== want.method) {
    return reject('written for another server or method')
  }
  if (head.uri !== (want.uri ?? null)) return reject('written for another resource')
  // SECURITY: a private answer under a public key would be served to every caller.
  if (head.scope !== want.scope)
    return reject(`scope ${String(head.scope)} under a ${want.scope} key`)
  const { ttlMs, lifeMs, pxMs, bytes } = head
  if (!isPositiveInt(ttlMs) || !isPositiveInt(lifeMs) || !isPositiveInt(pxMs)) {
    return reject('lifetimes are not positive integers')
  }
  if (lifeMs > ttlMs) return reject('fresh for longer than its ttlMs')
  if (pttl <= 0) return reject('no remaining lifetime')
  const result = value.subarray(nl + 1)
  if (result.length !== bytes) return reject('result length differs from the header')
  const problem = resultProblem(result, want)
  if (problem !== undefined) return reject(problem)
  const age = Math.max(0, pxMs - pttl)
  return {
    entry: {
      key: want.key,
      server: want.server,
      method: want.method,
      uri: want.uri,
      scope: want.scope,
      ttlMs,
      // SECURITY: capped here too: another writer's lifetime never outlives this gateway's limit.
      lifeMs: Math.min(lifeMs, want.maxTtlMs),
      storedAt: now - age,
      result: Buffer.from(result),
    },
  }
}

/** Why `bytes` are not a result this gateway would have stored, or undefined when they are. */
function resultProblem(bytes: Buffer, want: SharedExpectation): string | undefined {
  let text: string
  let parsed: unknown
  try {
    text = utf8.decode(bytes)
    parsed = JSON.parse(text)
  } catch {
    return 'result is not UTF-8 JSON'
  }
  if (!isRecord(parsed)) return 'result is not a JSON object'
  // SECURITY: exactly what JSON.stringify writes, so the bytes are one object and nothing else:
  // no second "id" after a closing brace, no duplicate keys read differently by other parsers.
  if (JSON.stringify(parsed) !== text) return 'result is not in the form the gateway writes'
  if (parsed.resultType !== 'complete') return 'result is not complete'
  if (Object.hasOwn(parsed, 'ttlMs')) return 'result carries its own ttlMs'
  if (parsed.cacheScope !== want.scope) return 'result scope differs from the header'
  const array = RESULT_ARRAYS[want.method]
  if (array !== undefined && !Array.isArray(parsed[array])) return `result has no ${array} array`
  const object = RESULT_OBJECTS[want.method]
  if (object !== undefined && !isRecord(parsed[object])) return `result has no ${object} object`
  return undefined
}

function reject(why: string): SharedRead {
  return { rejected: why }
}

function isPositiveInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0
}
