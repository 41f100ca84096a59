import { describe, expect, it } from 'vitest'
import { canSubscribe, filterFor } from '../../../src/client/discover.js'

describe('filterFor', () => {
  it('asks only for what the backend advertises', () => {
    expect(filterFor({ tools: { listChanged: true } }, ['docs://a'])).toEqual({
      toolsListChanged: true,
    })
    expect(
      filterFor(
        { prompts: { listChanged: true }, resources: { listChanged: true, subscribe: true } },
        ['x://1'],
      ),
    ).toEqual({
      promptsListChanged: true,
      resourcesListChanged: true,
      resourceSubscriptions: ['x://1'],
    })
    expect(filterFor({ tools: {}, resources: { subscribe: false } }, [])).toBeUndefined()
    expect(canSubscribe({ resources: { subscribe: true } })).toBe(true)
    expect(canSubscribe({ resources: {} })).toBe(false)
  })
})
