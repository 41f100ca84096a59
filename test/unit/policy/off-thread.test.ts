import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, vi } from 'vitest'
import {
  checkPolicyFolder,
  loadPolicySet,
  loadPolicySetBeside,
  PolicyError,
  readPolicyFolder,
  type PolicyLoadOptions,
} from '../../../src/policy/load.js'
import {
  compileRule,
  movedRule,
  RuleMemo,
  type CompiledRule,
  type SourcedRule,
} from '../../../src/policy/compile.js'
import { endReader, movedSources, readFolderBeside } from '../../../src/policy/off-thread.js'
import type { Decision, PolicySet } from '../../../src/policy/policy.js'
import { Pacer } from '../../../src/policy/slices.js'
import { caller, tempFolder } from './fixtures.js'

/**
 * A policy folder read for a reload in a process of its own (src/policy/off-thread.ts) loads into
 * the same policy, and is refused with the same located problems, as one read on the calling
 * thread. `offThreadBytes` chooses: a folder over it is read in the reader.
 */

const FILES = {
  'a.yaml': `rules:
  - name: readers
    servers: [weather]
    allow: { tools: ["get_*"], resources: ["weather://*"] }
  - name: admins
    when: { claims: { groups: admin } }
    servers: ["*"]
    allow: { tools: ["*"] }
  - name: small-queries
    servers: [docs]
    allow: { tools: [query] }
    if: 'args.limit <= 100.0'
limits:
  - { name: calls, servers: ["*"], tools: ["*"], key: ip, rate: 10/second }
`,
  'b.yaml': `rules:
  - { name: no-deletes, servers: ["*"], deny: { tools: ["delete_*"] } }
`,
}

const here = (folder: string, offThreadBytes: number): PolicyLoadOptions => ({
  folder,
  label: 'policies',
  mode: 'enforce',
  servers: ['weather', 'docs'],
  offThreadBytes,
})

/** A decision with its rule by id: the two policies' compiled rules are different objects. */
const decided = (d: Decision) => ({ ...d, rule: d.rule?.id })

function sameDecisions(a: PolicySet, b: PolicySet): void {
  expect(b.id).toBe(a.id)
  expect(b.runtimeShape).toBe(a.runtimeShape)
  expect(b.rules.map((r) => [r.id, r.source])).toEqual(a.rules.map((r) => [r.id, r.source]))
  expect(b.limits.map((l) => l.id)).toEqual(a.limits.map((l) => l.id))
  const admin = caller({ groups: ['admin'] })
  for (const who of [undefined, caller(), admin])
    for (const name of ['get_forecast', 'delete_station', 'query', 'other'])
      for (const server of ['weather', 'docs']) {
        const t = { kind: 'tool', name } as const
        expect(decided(b.check(who, server, t, { limit: 5 }))).toEqual(
          decided(a.check(who, server, t, { limit: 5 })),
        )
      }
}

function refusal(load: () => unknown): PolicyError {
  try {
    load()
  } catch (err) {
    if (err instanceof PolicyError) return err
    throw err
  }
  throw new Error('expected the policies to be refused')
}

async function refusalBeside(load: () => Promise<unknown>): Promise<PolicyError> {
  const err: unknown = await load().then(
    () => new Error('expected the policies to be refused'),
    (e: unknown) => e,
  )
  if (err instanceof PolicyError) return err
  throw err
}

/** The processes `pid` started, from /proc (proc(5): the fourth field of `stat` is the parent). */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8')
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid
      } catch {
        return false
      }
    })
    .map(Number)
}

/** A process's command line ('' once it ended). */
function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
  } catch {
    return ''
  }
}

/** A process's nice value (the nineteenth field of /proc/PID/stat). */
function niceOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])
}

describe('a policy folder read in the reload reader', () => {
  it('loads the same policy as one read on the calling thread', async () => {
    const folder = tempFolder(FILES)
    const inThread = loadPolicySet(here(folder, Infinity))
    sameDecisions(inThread, await loadPolicySetBeside(here(folder, 0)))
  })

  it.runIf(process.platform === 'linux')(
    'starts the reader at the lowest priority, before it could lower itself',
    async () => {
      endReader()
      const folder = tempFolder(FILES)
      const read = loadPolicySetBeside(here(folder, 0))
      // The fork is a few turns of the event loop away, and the reader lowers itself only once
      // Node has started in it, tens of milliseconds after it runs policy-reader.
      let child: number | undefined
      for (let k = 0; k < 100 && child === undefined; k++) {
        await new Promise((resolve) => setImmediate(resolve))
        child = childrenOf(process.pid).find((pid) => commandOf(pid).includes('policy-reader'))
      }
      expect(child).toBeDefined()
      expect(niceOf(child as number)).toBe(19)
      await read
    },
  )

  it.each([
    [
      'a YAML error and a schema problem',
      {
        'a.yaml': 'rules:\n  - { name: a, servers: [weather\n',
        'b.yaml': 'rules:\n  - { name: b, servers: [wether], alow: {} }\n',
      },
    ],
    [
      'a condition that does not compile',
      {
        'a.yaml': `rules:\n  - name: a\n    servers: [docs]\n    allow: {}\n    if: 'arg.x == 1'\n`,
      },
    ],
  ])('refuses %s with the same located problems', async (_what, files) => {
    const folder = tempFolder(files)
    const expected = refusal(() => loadPolicySet(here(folder, Infinity))).located
    expect(expected.length).toBeGreaterThan(0)
    expect((await refusalBeside(() => loadPolicySetBeside(here(folder, 0)))).located).toEqual(
      expected,
    )
  })
})

describe('loading beside a running policy', () => {
  it('leaves the event loop free while a large folder loads, where a load on this thread holds it', async () => {
    const lines = ['rules:']
    for (let i = 0; i < 3000; i++)
      lines.push(
        `  - name: team-${i}`,
        `    when: { claims: { groups: team-${i} } }`,
        '    servers: [weather]',
        `    allow: { tools: ["t${i}_*", "team${i}_report"] }`,
      )
    const folder = tempFolder({ 'a.yaml': `${lines.join('\n')}\n` })
    const t0 = performance.now()
    const held = loadPolicySet(here(folder, Infinity))
    const heldMs = performance.now() - t0
    let last = performance.now()
    let longest = 0
    const ticks = setInterval(() => {
      const now = performance.now()
      longest = Math.max(longest, now - last)
      last = now
    }, 1)
    try {
      const beside = await loadPolicySetBeside(here(folder, 64 * 1024))
      expect(beside.id).toBe(held.id)
      // Twelve chunks, each compiled as it came, in file order.
      expect(beside.rules.map((r) => [r.id, r.source])).toEqual(
        held.rules.map((r) => [r.id, r.source]),
      )
    } finally {
      clearInterval(ticks)
    }
    // The in-thread load held the loop for all of heldMs; beside, no gap comes near it.
    expect(longest).toBeLessThan(heldMs / 2)
  })
})

describe('a reload beside the running policy', () => {
  it('takes the rules an edit left as they were, compiles the rest, and decides as a fresh read', async () => {
    const folder = tempFolder(FILES)
    const running = loadPolicySet(here(folder, Infinity))
    // One rule edited in place (admins now need the ops group), one rule added at the top of
    // a.yaml (its other rules move: they are read from new places), b.yaml left alone.
    const edited = FILES['a.yaml']
      .replace('groups: admin }', 'groups: ops }')
      .replace(
        'rules:\n',
        'rules:\n  - { name: first, servers: [docs], allow: { tools: [ping] } }\n',
      )
    writeFileSync(join(folder, 'a.yaml'), edited)
    const reloaded = await loadPolicySetBeside(here(folder, 0), running)
    sameDecisions(loadPolicySet(here(folder, Infinity)), reloaded)
    const was = new Map(running.rules.map((r) => [r.name, r]))
    const taken = reloaded.rules.filter((r) => r === was.get(r.name)).map((r) => r.name)
    // b.yaml's rule is the running one, found at its new place in the list; none of a.yaml's.
    expect(taken).toEqual(['no-deletes'])
    expect(reloaded.rules.find((r) => r.name === 'admins')?.id).not.toBe(was.get('admins')?.id)
  })

  it('takes every rule of an unchanged folder as it runs, and only a rule from where it was read', async () => {
    const folder = tempFolder(FILES)
    const running = await loadPolicySetBeside(here(folder, 0))
    const again = await loadPolicySetBeside(here(folder, 0), running)
    expect(again.rules).toHaveLength(4)
    again.rules.forEach((r, i) => expect(r).toBe(running.rules[i]))
    // The same rules under another file name are read from elsewhere: compiled anew.
    const moved = tempFolder({ 'c.yaml': FILES['a.yaml'], 'd.yaml': FILES['b.yaml'] })
    const elsewhere = await loadPolicySetBeside(here(moved, 0), running)
    expect(elsewhere.rules.map((r) => r.id)).toEqual(running.rules.map((r) => r.id))
    elsewhere.rules.forEach((r, i) => expect(r).not.toBe(running.rules[i]))
  })
  it('is sent only the rules an edit changed: the others are the running ones', async () => {
    const folder = tempFolder(FILES)
    const running = loadPolicySet(here(folder, Infinity))
    writeFileSync(
      join(folder, 'a.yaml'),
      FILES['a.yaml'].replace('groups: admin }', 'groups: ops }'),
    )
    const memo = new RuleMemo()
    const sent: string[] = []
    const take = (r: SourcedRule): CompiledRule => {
      sent.push(r.rule.name)
      return compileRule(r, memo)
    }
    const read = await readFolderBeside(here(folder, 0), take, new Pacer(), running.rules)
    // Only the edited rule crossed from the reader; the other three are the running objects.
    expect(sent).toEqual(['admins'])
    const rules = 'rules' in read ? read.rules : []
    expect(rules.map((r, i) => r === running.rules[i])).toEqual([true, false, true, true])
    expect(rules.map((r) => r.id)).toEqual(
      loadPolicySet(here(folder, Infinity)).rules.map((r) => r.id),
    )
  })

  it('takes a moved run only with a source per rule, and only where moved rules are taken', () => {
    const move = (r: CompiledRule) => r
    expect(movedSources({ from: 2, count: 2 }, move)).toBeUndefined()
    expect(
      movedSources({ from: 2, count: 2, sources: ['a rules[3]', 'a rules[4]'] }, move),
    ).toEqual(['a rules[3]', 'a rules[4]'])
    for (const sources of [['a rules[3]'], ['a rules[3]', 4], 'a rules[3]'])
      expect(() =>
        movedSources({ from: 2, count: 2, sources: sources as readonly string[] }, move),
      ).toThrow('the reader sent moved rules 2 to 3 malformed')
    expect(() => movedSources({ from: 2, count: 1, sources: ['a rules[3]'] }, undefined)).toThrow(
      'malformed',
    )
  })

  it('is sent a rule added before others, and the others as the running ones, moved', async () => {
    const folder = tempFolder(FILES)
    const running = loadPolicySet(here(folder, Infinity))
    const added = '  - { name: first, servers: [docs], allow: { tools: [ping] } }\n'
    writeFileSync(join(folder, 'a.yaml'), FILES['a.yaml'].replace('rules:\n', `rules:\n${added}`))
    const fresh = loadPolicySet(here(folder, Infinity))
    const read = async (move?: typeof movedRule) => {
      const memo = new RuleMemo()
      const sent: string[] = []
      const take = (r: SourcedRule): CompiledRule => {
        sent.push(r.rule.name)
        return compileRule(r, memo)
      }
      const answer = await readFolderBeside(here(folder, 0), take, new Pacer(), running.rules, move)
      if (!('rules' in answer)) throw new Error('refused')
      // Read from where a first read finds them, with their ids.
      expect(answer.rules.map((r) => [r.id, r.source])).toEqual(
        fresh.rules.map((r) => [r.id, r.source]),
      )
      return { sent, rules: answer.rules }
    }
    // a.yaml's three rules moved one place down: copies of the running ones with their new
    // sources (what they compiled to is shared: the matcher, the condition); b.yaml's is kept.
    const moved = await read(movedRule)
    expect(moved.sent).toEqual(['first'])
    const was = new Map(running.rules.map((r) => [r.name, r]))
    for (const r of moved.rules.slice(1, 4)) {
      expect(r).not.toBe(was.get(r.name))
      expect(r.servers).toBe(was.get(r.name)?.servers)
      expect(r.condition).toBe(was.get(r.name)?.condition)
      expect(r).toEqual({ ...was.get(r.name), source: r.source })
    }
    expect(moved.rules[4]).toBe(was.get('no-deletes'))
    // And through the reload itself, which decides as a first read does.
    sameDecisions(fresh, await loadPolicySetBeside(here(folder, 0), running))
    // A caller that takes no moved rules is sent them in full.
    expect((await read()).sent).toEqual(['first', 'readers', 'admins', 'small-queries'])
  })
})

describe('the running rules named by the read that answered them', () => {
  /** The running rules a read of the folder kept (the same objects), by name. */
  const keptOf = (rules: readonly CompiledRule[], running: readonly CompiledRule[]) =>
    rules.filter((r, i) => r === running[i]).map((r) => r.name)

  it('finds unchanged rules among the running ones, whichever policy runs', async () => {
    const folder = tempFolder(FILES)
    const take =
      (memo = new RuleMemo()) =>
      (r: SourcedRule) =>
        compileRule(r, memo)
    const fresh = () => loadPolicySet(here(folder, Infinity)).rules.map((r) => [r.id, r.source])
    const read = async (running: readonly CompiledRule[]) => {
      const answer = await readFolderBeside(here(folder, 0), take(), new Pacer(), running)
      if (!('rules' in answer)) throw new Error('refused')
      expect(answer.rules.map((r) => [r.id, r.source])).toEqual(fresh())
      return answer.rules
    }
    const first = loadPolicySet(here(folder, Infinity)).rules
    // An added rule at the top of a.yaml moves every rule of the folder by one.
    const moved = FILES['a.yaml'].replace(
      'rules:\n',
      'rules:\n  - { name: first, servers: [docs], allow: { tools: [ping] } }\n',
    )
    writeFileSync(join(folder, 'a.yaml'), moved)
    const answered = await read(first)
    expect(keptOf(answered, first)).toEqual([])
    // The reload of `answered` is not adopted: what runs is still `first`. A second edit is read
    // against `first`, at its places, not against the read that answered last.
    writeFileSync(join(folder, 'a.yaml'), moved.replace('groups: admin }', 'groups: ops }'))
    const again = await read(first)
    expect(keptOf(again, first)).toEqual([])
    expect(again.map((r) => r.name)).toEqual([
      'first',
      'readers',
      'admins',
      'small-queries',
      'no-deletes',
    ])
    // Now `again` runs: the reader knows its rules from its own read.
    writeFileSync(join(folder, 'b.yaml'), FILES['b.yaml'].replace('delete_*', 'drop_*'))
    const third = await read(again)
    expect(keptOf(third, again)).toEqual(['first', 'readers', 'admins', 'small-queries'])
    // And after a reader of its own (the last one ended), from the list again.
    endReader()
    writeFileSync(join(folder, 'b.yaml'), FILES['b.yaml'])
    const fourth = await read(third)
    expect(keptOf(fourth, third)).toEqual(['first', 'readers', 'admins', 'small-queries'])
  })
})

describe("the reader's files from its last read", () => {
  it('parses again only the files whose text changed, and reads as a first read does', () => {
    const folder = tempFolder(FILES)
    const first = checkPolicyFolder(here(folder, 0))
    writeFileSync(
      join(folder, 'a.yaml'),
      FILES['a.yaml'].replace('groups: admin }', 'groups: ops }'),
    )
    const second = checkPolicyFolder(here(folder, 0))
    // b.yaml's rule is the object read the first time; a.yaml's are read anew.
    expect(second.rules.at(-1)).toBe(first.rules.at(-1))
    expect(second.rules[0]).not.toBe(first.rules[0])
    const fresh = readPolicyFolder(here(folder, Infinity))
    expect(second.id).toBe(fresh.id)
    expect(second.compiled.map((r) => r.id)).toEqual(fresh.compiled.map((r) => r.id))
    expect(second.rules.map((r) => r.rule)).toEqual(fresh.rules.map((r) => r.rule))
    // A file written back to a text read before is read as it is now, not as kept then.
    writeFileSync(join(folder, 'a.yaml'), FILES['a.yaml'])
    expect(checkPolicyFolder(here(folder, 0)).id).toBe(first.id)
  })

  it('finds and places the problems of a folder with kept files as a first read does', () => {
    const folder = tempFolder(FILES)
    checkPolicyFolder(here(folder, 0))
    // b.yaml now repeats a rule name of the kept a.yaml, and has a condition that does not compile.
    writeFileSync(
      join(folder, 'b.yaml'),
      `rules:\n  - { name: readers, servers: [docs], allow: {} }\n  - { name: odd, servers: [docs], allow: {}, if: 'args.x ==' }\n`,
    )
    const expected = refusal(() => readPolicyFolder(here(folder, Infinity))).located
    expect(expected.length).toBeGreaterThan(0)
    expect(refusal(() => checkPolicyFolder(here(folder, 0))).located).toEqual(expected)
    expect(refusal(() => checkPolicyFolder(here(folder, 0))).located).toEqual(expected)
  })
})

describe('reading a folder off thread', () => {
  it('fails the read when taking a rule in fails, and reads again in a reader of its own', async () => {
    const folder = tempFolder(FILES)
    const take = (r: SourcedRule): string => `${r.source} ${r.rule.name}`
    const first = await readFolderBeside(here(folder, 0), take, new Pacer())
    expect('rules' in first && first.rules).toHaveLength(4)
    await expect(
      readFolderBeside(
        here(folder, 0),
        () => {
          throw new Error('refused in take')
        },
        new Pacer(),
      ),
    ).rejects.toThrow('refused in take')
    // The failed read ended its reader; the next one starts another and reads the same.
    expect(await readFolderBeside(here(folder, 0), take, new Pacer())).toEqual(first)
    // So does a read after the kept reader was ended (as it is after a minute without reads).
    endReader()
    expect(await readFolderBeside(here(folder, 0), take, new Pacer())).toEqual(first)
  })

  it('answers reads asked for at once each with its own folder, one after another', async () => {
    const one = tempFolder(FILES)
    const other = tempFolder({ 'c.yaml': FILES['b.yaml'] })
    const [a, b, c] = await Promise.all([
      loadPolicySetBeside(here(one, 0)),
      loadPolicySetBeside(here(other, 0)),
      loadPolicySetBeside(here(one, 0)),
    ])
    expect(a.id).toBe(loadPolicySet(here(one, Infinity)).id)
    expect(b.id).toBe(loadPolicySet(here(other, Infinity)).id)
    expect(c.id).toBe(a.id)
    expect(b.rules.map((r) => r.source)).toEqual([expect.stringContaining('c.yaml')])
  })

  it.runIf(process.platform === 'linux')(
    'leaves no reader behind a gateway that was killed',
    async () => {
      const folder = tempFolder(FILES)
      // A gateway of its own that reads once, keeps its reader, and says its pid.
      const script = `
        import { readFolderBeside } from './src/policy/off-thread.ts'
        import { Pacer } from './src/policy/slices.ts'
        await readFolderBeside(${JSON.stringify(here(folder, 0))}, (r) => r, new Pacer())
        console.log(process.pid)
        setInterval(() => {}, 1000)
      `
      const gateway = spawn(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '-e', script],
        {
          cwd: fileURLToPath(new URL('../../../', import.meta.url)),
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      )
      const pid = Number(
        await new Promise<string>((resolve) =>
          gateway.stdout.once('data', (d) => resolve(String(d))),
        ),
      )
      const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ')
      expect(children).toHaveLength(1)
      const reader = Number(children[0])
      expect(readFileSync(`/proc/${reader}/cmdline`, 'utf8')).toContain('policy-reader')
      gateway.kill('SIGKILL')
      await vi.waitFor(() => expect(existsSync(`/proc/${reader}`)).toBe(false), { timeout: 5000 })
    },
  )

  it('fails the read with what the reader said when it crashed', async () => {
    // No label to name the files by: the reader's own code throws, which is no PolicyError.
    const folder = tempFolder(FILES)
    await expect(readFolderBeside({ folder }, (rule) => rule, new Pacer())).rejects.toThrow(
      /^reading the policy folder failed: /,
    )
  })
})
