import { describe, expect, it } from 'vitest'
import { StreamEnding } from '../../../src/pipeline/stream-ending.js'

describe('StreamEnding', () => {
  it('runs the listeners once, in the order they were added, with how the stream ended', () => {
    const ending = new StreamEnding()
    const seen: string[] = []
    ending.onEnd((e) => seen.push(`a ${e.outcome} ${e.upstreamId ?? '-'}`))
    ending.onEnd((e) => seen.push(`b ${e.outcome}`))
    expect(seen).toEqual([])
    ending.end({ outcome: 'ok', upstreamId: 'r1' })
    ending.end({ outcome: 'client_closed', upstreamId: undefined })
    expect(seen).toEqual(['a ok r1', 'b ok'])
  })

  it('runs a listener added after the end at once, with the first end', () => {
    const ending = new StreamEnding()
    ending.end({ outcome: 'upstream_reset', upstreamId: 'r2' })
    const seen: string[] = []
    ending.onEnd((e) => seen.push(`${e.outcome} ${e.upstreamId ?? '-'}`))
    expect(seen).toEqual(['upstream_reset r2'])
  })
})
