import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : e.name.endsWith('.ts')
        ? [join(dir, e.name)]
        : [],
  )
}

describe('hot-path rules', () => {
  it('no stage reads c.var (hono copies every variable into a new object on each access)', () => {
    const offenders = sources('src').filter((f) => /\bc\.var\b/.test(readFileSync(f, 'utf8')))
    expect(offenders).toEqual([])
  })

  it('no global fetch or web streams on the forwarding path (performance.md: 5-10x the CPU of undici pools)', () => {
    const offenders = sources('src/upstream')
      .concat(sources('src/pipeline'))
      .filter((f) => /\bfetch\(|Readable\.toWeb|new Response\(/.test(readFileSync(f, 'utf8')))
    expect(offenders).toEqual([])
  })

  it('the pure core does not import hono', () => {
    const pure = ['src/mcp', 'src/policy', 'src/cache', 'src/auth', 'src/upstream'].flatMap(sources)
    expect(pure.filter((f) => /from 'hono|from '@hono/.test(readFileSync(f, 'utf8')))).toEqual([])
  })
})
