import { errors } from 'undici'
import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/errors.js'
import { classifyFailure, UpstreamFailure } from '../../../src/upstream/failure.js'

/** A system error as node:net raises it (the code is all classifyFailure reads). */
function sysError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:1`), { code })
}

/** undici's parser error as llhttp raises it (its constructor prefixes `HPE_`; the types omit it). */
function parserError(code: string): Error {
  const Ctor = errors.HTTPParserError as unknown as new (message: string, code: string) => Error
  return new Ctor('Response does not match the HTTP/1.1 protocol', code)
}

/** An error carrying only a code, for undici codes without an exported class in this version. */
function coded(code: string, name = 'Error'): Error {
  return Object.assign(new Error(code), { code, name })
}

describe('classifyFailure: whether the request may have left, and whose fault it is', () => {
  // sent false = NotSent: it never reached the replica and may go to another one, even tools/call
  // (docs/design/retries.md). replicaFault counts against the replica's health.
  it.each<[string, Error, string, boolean, boolean]>([
    ['connection refused', sysError('ECONNREFUSED'), 'upstream_unavailable', false, true],
    ['unknown host', sysError('ENOTFOUND'), 'upstream_unavailable', false, true],
    ['DNS try again', sysError('EAI_AGAIN'), 'upstream_unavailable', false, true],
    ['host unreachable', sysError('EHOSTUNREACH'), 'upstream_unavailable', false, true],
    ['network unreachable', sysError('ENETUNREACH'), 'upstream_unavailable', false, true],
    ['no local address', sysError('EADDRNOTAVAIL'), 'upstream_unavailable', false, true],
    [
      'undici connect timeout',
      new errors.ConnectTimeoutError(),
      'upstream_unavailable',
      false,
      true,
    ],
    // The gateway closed its own pool (reload, shutdown): not sent, and not the replica's fault.
    [
      'pool closed by the gateway',
      new errors.ClientClosedError(),
      'upstream_unavailable',
      false,
      false,
    ],
    [
      'pool destroyed by the gateway',
      new errors.ClientDestroyedError(),
      'upstream_unavailable',
      false,
      false,
    ],
    // Once the request may have been written, it may have run.
    ['headers timeout', new errors.HeadersTimeoutError(), 'upstream_timeout', true, true],
    ['body timeout', new errors.BodyTimeoutError(), 'upstream_timeout', true, true],
    ['connection reset', sysError('ECONNRESET'), 'upstream_unavailable', true, true],
    ['broken pipe', sysError('EPIPE'), 'upstream_unavailable', true, true],
    [
      'undici socket error',
      new errors.SocketError('other side closed'),
      'upstream_unavailable',
      true,
      true,
    ],
    [
      'aborted by the gateway',
      new errors.RequestAbortedError(),
      'upstream_unavailable',
      true,
      false,
    ],
    [
      'garbage on the wire (llhttp)',
      parserError('INVALID_CONSTANT'),
      'upstream_bad_response',
      true,
      true,
    ],
    ['an HPE_ code alone', coded('HPE_INVALID_HEADER_TOKEN'), 'upstream_bad_response', true, true],
    [
      'an HTTPParserError by name',
      coded('', 'HTTPParserError'),
      'upstream_bad_response',
      true,
      true,
    ],
    [
      'a status the client refused',
      coded('UND_ERR_RESPONSE_STATUS_CODE'),
      'upstream_bad_response',
      true,
      true,
    ],
    ['an error without a code', new Error('boom'), 'upstream_unavailable', true, true],
    ['an unknown undici code', coded('UND_ERR_SOMETHING_NEW'), 'upstream_unavailable', true, true],
  ])('%s', (_label, err, code, sent, replicaFault) => {
    const f = classifyFailure(err, undefined)
    expect(f).toBeInstanceOf(UpstreamFailure)
    expect(f).toBeInstanceOf(GatewayError)
    expect({ code: f.code, sent: f.sent, replicaFault: f.replicaFault }).toEqual({
      code,
      sent,
      replicaFault,
    })
    expect(f.cause).toBe(err)
  })

  it.each<[Error, number | undefined]>([
    [new errors.BodyTimeoutError(), 200],
    [new errors.SocketError('closed'), 502],
    [sysError('ECONNREFUSED'), undefined],
  ])('keeps the status the replica answered (%s, %s)', (err, status) => {
    expect(classifyFailure(err, status).status).toBe(status)
  })
})

describe('UpstreamFailure: named options', () => {
  it.each<[boolean | undefined, boolean]>([
    [undefined, false],
    [false, false],
    [true, true],
  ])('replicaFault %s → %s (a failure is not the replica’s unless said so)', (given, want) => {
    const opts = given === undefined ? { sent: true } : { sent: true, replicaFault: given }
    expect(new UpstreamFailure('upstream_bad_response', opts).replicaFault).toBe(want)
  })
})
