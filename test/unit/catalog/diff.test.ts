import { describe, expect, it } from 'vitest'
import { definitionDigest, modelView } from '../../../src/catalog/definition.js'
import { compareCatalogs, diffLines, renderChanges } from '../../../src/catalog/diff.js'
import type { CatalogLock, LockedDefinition } from '../../../src/catalog/lock.js'

function locked(item: Record<string, unknown>): LockedDefinition {
  return { digest: definitionDigest('tools', item), definition: modelView('tools', item) }
}

function lockOf(servers: Record<string, Record<string, Record<string, unknown>>>): CatalogLock {
  const map = new Map(
    Object.entries(servers).map(([s, tools]) => [
      s,
      {
        tools: new Map(Object.entries(tools).map(([n, t]) => [n, locked(t)])),
        prompts: new Map<string, LockedDefinition>(),
      },
    ]),
  )
  return { version: 1, servers: map }
}

const A = { name: 'a', description: 'one\ntwo\nthree\n' }
const B = { name: 'b', description: 'B' }

describe('compareCatalogs', () => {
  it('finds added, removed and changed definitions, sorted, and nothing when digests match', () => {
    const before = lockOf({ s: { a: A, b: B }, gone: { b: B } })
    const after = lockOf({ s: { a: { ...A, description: 'one\n2\nthree\n' }, c: B } })
    expect(compareCatalogs(before, before)).toEqual([])
    const changes = compareCatalogs(before, after)
    expect(changes.map((c) => [c.server, c.name, c.change])).toEqual([
      ['gone', 'b', 'removed'],
      ['s', 'a', 'changed'],
      ['s', 'b', 'removed'],
      ['s', 'c', 'added'],
    ])
    expect(compareCatalogs(before, after, ['s']).map((c) => c.server)).toEqual(['s', 's', 's'])
  })

  it('does not report a definition whose keys only came in another order', () => {
    const before = lockOf({
      s: { a: { name: 'a', inputSchema: { type: 'object', required: [] } } },
    })
    const after = lockOf({ s: { a: { inputSchema: { required: [], type: 'object' }, name: 'a' } } })
    expect(compareCatalogs(before, after)).toEqual([])
  })
})

describe('renderChanges', () => {
  const changes = compareCatalogs(
    lockOf({ s: { a: A } }),
    lockOf({ s: { a: { ...A, description: 'one\n2\nthree\n' }, b: B } }),
  )

  it('writes a line diff of the YAML text for a change and the text of an addition', () => {
    expect(renderChanges(changes, { color: false })).toBe(
      's: tool "a" changed\n' +
        '    name: a\n' +
        '    description: |\n' +
        '      one\n' +
        '  -   two\n' +
        '  +   2\n' +
        '      three\n' +
        's: tool "b" added\n' +
        '  + name: b\n' +
        '  + description: B\n',
    )
  })

  it('colours only when asked', () => {
    const text = renderChanges(changes, { color: true })
    expect(text).toContain('\x1b[31m  -   two\x1b[0m\n')
    expect(text).toContain('\x1b[32m  +   2\x1b[0m\n')
    expect(text).toContain('\x1b[1ms: tool "a" changed\x1b[0m\n')
  })
})

describe('diffLines', () => {
  it('keeps three lines of context and folds the rest', () => {
    const a = ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10']
    const b = ['1', '2', '3', '4', '5', 'six', '7', '8', '9', '10']
    expect(diffLines(a, b, 3).map((l) => `${l.op}${l.text}`)).toEqual([
      '…',
      ' 3',
      ' 4',
      ' 5',
      '-6',
      '+six',
      ' 7',
      ' 8',
      ' 9',
      '…',
    ])
  })

  it('shows insertions and deletions at the edges', () => {
    expect(diffLines(['x'], ['w', 'x', 'y'], 3).map((l) => `${l.op}${l.text}`)).toEqual([
      '+w',
      ' x',
      '+y',
    ])
    expect(diffLines(['a', 'b'], [], 3).map((l) => `${l.op}${l.text}`)).toEqual(['-a', '-b'])
  })
})
