import { describe, expect, it } from 'vitest'
import { callbackProblem } from '../../../src/policy/event-callbacks.js'

/**
 * Where an event callback may point (docs/events.md §Webhooks): an IPv6 address that carries an
 * IPv4 address (NAT64, IPv4-mapped, IPv4-translated, IPv4-compatible, 6to4, Teredo) is judged by
 * that IPv4 address, with the rules of a plain one, and every spelling of `localhost` is an
 * internal name. Each row is checked under a wildcard pattern (an internal address needs a
 * literal origin) and under a pattern naming its origin literally (where only the never-class is
 * still refused).
 */

type Reach = 'public' | 'internal' | 'never'

const TABLE: readonly [string, Reach, string][] = [
  // Plain IPv4, for comparison.
  ['8.8.8.8', 'public', 'a public IPv4 address'],
  ['10.0.0.5', 'internal', 'a private IPv4 address'],
  ['169.254.169.254', 'never', 'the cloud metadata address'],
  // NAT64, the well-known prefix (RFC 6052 §2.1): the IPv4 address in the last 32 bits.
  ['[64:ff9b::808:808]', 'public', 'NAT64 of 8.8.8.8'],
  ['[64:ff9b::a00:5]', 'internal', 'NAT64 of 10.0.0.5'],
  ['[64:ff9b::7f00:1]', 'internal', 'NAT64 of 127.0.0.1'],
  ['[64:ff9b::a9fe:a9fe]', 'never', 'NAT64 of 169.254.169.254'],
  // NAT64, the local-use prefix (RFC 8215): read as /96, and never better than internal.
  ['[64:ff9b:1::a00:5]', 'internal', 'local-use NAT64 of 10.0.0.5'],
  ['[64:ff9b:1:ab::c0a8:101]', 'internal', 'local-use NAT64 of 192.168.1.1'],
  ['[64:ff9b:1::a9fe:a9fe]', 'never', 'local-use NAT64 of 169.254.169.254'],
  ['[64:ff9b:1::808:808]', 'internal', 'local-use NAT64 of 8.8.8.8: a site translator'],
  // IPv4-mapped (RFC 4291 §2.5.5.2).
  ['[::ffff:808:808]', 'public', 'IPv4-mapped 8.8.8.8'],
  ['[::ffff:a00:5]', 'internal', 'IPv4-mapped 10.0.0.5'],
  ['[::ffff:7f00:1]', 'internal', 'IPv4-mapped 127.0.0.1'],
  ['[::ffff:a9fe:a9fe]', 'never', 'IPv4-mapped 169.254.169.254'],
  // IPv4-translated (RFC 2765 §2.1).
  ['[::ffff:0:a00:5]', 'internal', 'IPv4-translated 10.0.0.5'],
  ['[::ffff:0:a9fe:a9fe]', 'never', 'IPv4-translated 169.254.169.254'],
  // IPv4-compatible (RFC 4291 §2.5.5.1, deprecated; still tunnelled by some stacks).
  ['[::808:808]', 'public', 'IPv4-compatible 8.8.8.8'],
  ['[::a00:5]', 'internal', 'IPv4-compatible 10.0.0.5'],
  ['[::7f00:1]', 'internal', 'IPv4-compatible 127.0.0.1'],
  ['[::a9fe:a9fe]', 'never', 'IPv4-compatible 169.254.169.254'],
  ['[::2]', 'never', 'IPv4-compatible 0.0.0.2 ("this network")'],
  // 6to4 (RFC 3056 §2): the IPv4 address in bits 16-47.
  ['[2002:808:808::1]', 'public', '6to4 of 8.8.8.8'],
  ['[2002:a00:5::]', 'internal', '6to4 of 10.0.0.5'],
  ['[2002:c0a8:101:1::1]', 'internal', '6to4 of 192.168.1.1'],
  ['[2002:7f00:1::]', 'internal', '6to4 of 127.0.0.1'],
  ['[2002:a9fe:a9fe::]', 'never', '6to4 of 169.254.169.254'],
  // Teredo (RFC 4380 §4): the client is the bitwise NOT of the last 32 bits; server in 32-63.
  ['[2001:0:4136:e378:8000:63bf:f7f7:f7f7]', 'public', 'Teredo client 8.8.8.8'],
  ['[2001:0:4136:e378:8000:63bf:f5ff:fffa]', 'internal', 'Teredo client 10.0.0.5'],
  ['[2001:0:4136:e378:8000:63bf:80ff:fffe]', 'internal', 'Teredo client 127.0.0.1'],
  ['[2001:0:4136:e378:8000:63bf:5601:5601]', 'never', 'Teredo client 169.254.169.254'],
  ['[2001:0:a00:5:8000:63bf:f7f7:f7f7]', 'internal', 'Teredo server 10.0.0.5'],
  // Other IPv6: only global unicast (2000::/3) outside the special ranges is public.
  ['[2606:4700::1111]', 'public', 'global unicast'],
  ['[::1]', 'internal', 'loopback'],
  ['[fc00::1]', 'internal', 'unique local'],
  ['[fd12:3456::1]', 'internal', 'unique local'],
  ['[fec0::1]', 'internal', 'site-local (deprecated, still routed inside some sites)'],
  ['[100::1]', 'internal', 'discard-only'],
  ['[2001:db8::1]', 'internal', 'documentation'],
  ['[::1:a00:5]', 'internal', 'reserved, not global unicast'],
  ['[::]', 'never', 'unspecified'],
  ['[fe80::1]', 'never', 'link-local'],
  ['[ff02::1]', 'never', 'multicast'],
  // Names.
  ['hooks.example.com', 'public', 'a public name'],
  ['localhost', 'internal', 'localhost'],
  ['localhost.', 'internal', 'localhost with a trailing dot'],
  ['localhost..', 'internal', 'localhost with two trailing dots'],
  ['localhost...', 'internal', 'localhost with three trailing dots'],
  ['api.localhost', 'internal', 'a name under localhost (RFC 6761 §6.3)'],
  ['api.localhost..', 'internal', 'a name under localhost with trailing dots'],
  ['localhost.localdomain', 'internal', 'localhost.localdomain'],
  ['localhost.localdomain.', 'internal', 'localhost.localdomain with a trailing dot'],
  ['api.localhost.localdomain', 'internal', 'a name under localhost.localdomain'],
  ['metadata', 'internal', 'a single label'],
  ['metadata..', 'internal', 'a single label with trailing dots'],
  ['db.internal.', 'internal', 'an internal suffix with a trailing dot'],
]

const PROBLEM: Readonly<Record<Reach, RegExp | undefined>> = {
  public: undefined,
  internal: /internal address is allowed only where a pattern names the origin/,
  never: /never allowed/,
}

describe('event callbacks: addresses by what they reach', () => {
  it.each(TABLE)('https://%s/ is %s (%s)', (host, reach) => {
    const url = `https://${host}/hook`
    const problem = callbackProblem(url, ['https://*'])
    const expected = PROBLEM[reach]
    if (expected === undefined) expect(problem).toBeUndefined()
    else expect(problem).toMatch(expected)
    // A pattern naming the origin literally admits internal addresses, never the never-class.
    const literal = callbackProblem(url, [`https://${host}`])
    if (reach === 'never') expect(literal).toMatch(/never allowed/)
    else expect(literal).toBeUndefined()
  })

  it.each(['https://LOCALHOST/', 'https://LocalHost.LocalDomain/', 'https://[::FFFF:a00:5]/'])(
    '%s is not in canonical form, so no pattern can match a spelling the check did not read',
    (url) => {
      expect(callbackProblem(url, ['https://*'])).toMatch(/canonical/)
    },
  )

  it('a plain http origin still needs a literal pattern, whatever it reaches', () => {
    expect(callbackProblem('http://[64:ff9b::808:808]/x', ['http://*'])).toMatch(/plain http/)
    expect(callbackProblem('http://[64:ff9b::a9fe:a9fe]/x', ['http://*'])).toMatch(/never/)
  })
})
