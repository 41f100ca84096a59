import { describe, expect, it } from 'vitest'
import { challengesFor, metadataUrl, publicBase, resourceUrl } from '../../../src/auth/resource.js'
import { scopesOf } from '../../../src/auth/verifier.js'

describe('resource and metadata URLs (RFC 9728 §3.1)', () => {
  it.each([
    [
      'https://mcp.example.com',
      'https://mcp.example.com/mcp/w',
      'https://mcp.example.com/.well-known/oauth-protected-resource/mcp/w',
    ],
    [
      'https://mcp.example.com/',
      'https://mcp.example.com/mcp/w',
      'https://mcp.example.com/.well-known/oauth-protected-resource/mcp/w',
    ],
    [
      'https://e.example:8443/gw/',
      'https://e.example:8443/gw/mcp/w',
      'https://e.example:8443/.well-known/oauth-protected-resource/gw/mcp/w',
    ],
  ])('%s', (publicUrl, resource, prm) => {
    const base = publicBase(publicUrl)
    expect(resourceUrl(base, 'w')).toBe(resource)
    expect(metadataUrl(base, 'w')).toBe(prm)
  })

  it('builds challenges that name every required scope', () => {
    const c = challengesFor('https://x/.well-known/oauth-protected-resource/mcp/w', ['a', 'b:c'])
    expect(c.insufficientScope).toBe(
      'Bearer error="insufficient_scope", scope="a b:c", resource_metadata="https://x/.well-known/oauth-protected-resource/mcp/w"',
    )
    expect(challengesFor('https://m', []).missing).toBe('Bearer resource_metadata="https://m"')
  })
})

describe('scopesOf', () => {
  it.each([
    [{ scope: 'a  b' }, ['a', 'b']],
    [{ scp: ['a', 'b', 3] }, ['a', 'b']],
    [{ scp: 'a b' }, ['a', 'b']],
    [{ scope: 'a', scp: ['b'] }, ['a', 'b']],
    [{ scope: 5 }, []],
    [{}, []],
  ])('%j → %j', (payload, expected) => {
    expect([...scopesOf(payload)]).toEqual(expected)
  })
})
