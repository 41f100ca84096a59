import { describe, expect, it } from 'vitest'
import {
  compileArgumentKeys,
  unionArgumentKeys,
  type ArgumentKeys,
} from '../../../src/mcp/argument-keys.js'
import { JsonScanError, scanJson } from '../../../src/mcp/strict-json.js'
import { compileCondition } from '../../../src/policy/condition.js'
import { policyOf } from './fixtures.js'

/** The compiled key reads of `conditions` (each an `if:`). */
function keysOf(...conditions: string[]): ArgumentKeys {
  return compileArgumentKeys(conditions.map((c) => compileCondition(c, 'if').reads)) as ArgumentKeys
}

const call = (args: string, field = 'arguments') =>
  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","${field}":${args}}}`

/** What the scanner says of `text` with these reads, in both modes (they must agree). */
function verdict(reads: ArgumentKeys | undefined, text: string): string {
  const one = (fast: boolean): string => {
    try {
      scanJson(text, { maxDepth: 64, fast, allKeys: true, reads })
      return 'ok'
    } catch (err) {
      if (err instanceof JsonScanError) return err.kind
      throw err
    }
  }
  const strict = one(false)
  expect(one(true), 'fast and strict scans agree').toBe(strict)
  return strict
}

describe('the keys a condition reads, judged in the body', () => {
  it.each([
    // has() and field selections: the key read, its folds and its NUL cuts.
    ['has(args.bcc)', '{"to":"a","bcc":"b"}', 'ok'],
    ['has(args.bcc)', '{"to":"a","Bcc":"b"}', 'case_variant_key'],
    ['has(args.bcc)', '{"BCC":"b"}', 'case_variant_key'],
    ['has(args.bcc)', '{"bcc\\u0000":"b"}', 'case_variant_key'],
    ['has(args.bcc)', '{"bcc\\u0000x":"b"}', 'case_variant_key'],
    ['has(args.bcc)', '{"b\\u0063c":"b"}', 'ok'],
    ['has(args.bcc)', '{"__proto__":{"bcc":"b"}}', 'prototype_key'],
    // Keys the condition does not read are the tool's business.
    ['has(args.bcc)', '{"To":"a","subject\\u0000":"s","bc":"x","opts":{"Bcc":1}}', 'ok'],
    ['args.ssl == true', '{"\\u017f\\u017fl":true}', 'case_variant_key'],
    ['args.kind == "x"', '{"\\u212aind":"x"}', 'case_variant_key'],
    ['args.id == "x"', '{"\\u0130d":"x"}', 'case_variant_key'],
    // Every depth a condition reads, through selections, literal indexes and list elements.
    ['args.opts.mode == "summary"', '{"opts":{"Mode":"full"}}', 'case_variant_key'],
    ['args.opts.mode == "summary"', '{"Opts":{"mode":"full"}}', 'case_variant_key'],
    ['args.opts.mode == "summary"', '{"opts":{"mode":"summary","other":{"Mode":1}}}', 'ok'],
    ['has(args.a.b.c)', '{"a":{"b":{"C":1}}}', 'case_variant_key'],
    ["args['größe'] > 1", '{"GRÖßE":2}', 'case_variant_key'],
    ["args['größe'] > 1", '{"grösse":2}', 'ok'],
    ["'cc' in args", '{"CC":"x"}', 'case_variant_key'],
    ['args.to[0].addr == "x"', '{"to":[{"Addr":"y"}]}', 'case_variant_key'],
    ['args.items.exists(i, has(i.bcc))', '{"items":[{"to":1},{"bCC":2}]}', 'case_variant_key'],
    ['dyn(args).bcc == 1', '{"Bcc":1}', 'case_variant_key'],
    ['(true ? args.a : args.b).c == 1', '{"b":{"C":1}}', 'case_variant_key'],
    // Whole maps: every key is read, judged against every name the condition writes.
    ['args.exists(k, k == "bcc")', '{"to":"a","Bcc":"b"}', 'case_variant_key'],
    ['args.exists(k, k == "bcc")', '{"to":"a","bcc":"b"}', 'ok'],
    ['args.exists(k, k == "bcc")', '{"to":"a","x\\u0000":"b"}', 'case_variant_key'],
    ['args.exists(k, k == "bcc")', '{"to":{"Bcc":"b"}}', 'case_variant_key'],
    ['size(args) < 5', '{"Bcc":1,"To":{"Subject":2}}', 'ok'],
    ['size(args) < 5', '{"a":{"b":[{"c\\u0000":1}]}}', 'case_variant_key'],
    ['size(args) < 5', '{"a":{"__proto__":{}}}', 'prototype_key'],
    ['args == {"bcc": 1}', '{"BCC":1}', 'case_variant_key'],
    // A key computed at run time may be any key of its level.
    // (The key looked up is a value of the body, so keys are judged as spelled: `bcc` here is
    // missing, the condition errs and denies.)
    ['args[args.field] == "x"', '{"field":"a","a\\u0000":"y"}', 'case_variant_key'],
    ['args[args.field] == "x"', '{"field":"bcc","Bcc":"y"}', 'ok'],
    // A comprehension variable named like a variable is that variable inside the loop only.
    ['[1].all(args, args > 0) && has(args.bcc)', '{"Bcc":1}', 'case_variant_key'],
    // Claims and the target come from elsewhere: no argument is read.
    ['claims.sub == "ann" && target == "t"', '{"Sub":1,"target\\u0000":2}', 'ok'],
  ])('%s: %s → %s', (condition, args, expected) => {
    expect(verdict(keysOf(condition), call(args))).toBe(expected)
  })

  it('judges completion/complete’s params.argument, and refuses keys read as it', () => {
    const reads = keysOf('has(args.value) && args.value != "salaries"')
    expect(verdict(reads, call('{"name":"topic","Value":"salaries"}', 'argument'))).toBe(
      'case_variant_key',
    )
    expect(verdict(reads, call('{"value":"x"}', 'Argument'))).toBe('case_variant_key')
    expect(verdict(reads, call('{"value":"x"}', 'argument\\u0000'))).toBe('case_variant_key')
    expect(verdict(reads, call('{"value":"x"}', 'argument'))).toBe('ok')
  })

  it('refuses no lone key without reads', () => {
    expect(verdict(undefined, call('{"Bcc":"b","opts":{"Mode":1},"x\\u0000":1}'))).toBe('ok')
  })

  it('unites the reads of several conditions, and of several servers', () => {
    const one = keysOf('has(args.bcc)')
    const two = keysOf('has(args.opts.mode)')
    const both = unionArgumentKeys([one, undefined, two]) as ArgumentKeys
    expect(verdict(both, call('{"Bcc":1}'))).toBe('case_variant_key')
    expect(verdict(both, call('{"opts":{"MODE":1}}'))).toBe('case_variant_key')
    expect(verdict(one, call('{"opts":{"MODE":1}}'))).toBe('ok')
    expect(unionArgumentKeys([undefined])).toBeUndefined()
  })

  it('falls back to judging every key at every depth when the reads are too many to merge', () => {
    // n paths, the i-th naming `a` at depth i and any key elsewhere: merged, the levels are the
    // 2^n sets of paths a body path can follow, past what the compiled form keeps.
    const paths = (n: number): string =>
      Array.from({ length: n }, (_, i) => {
        const steps = Array.from({ length: n }, (_, j) => (j === i ? '.a' : '[0]')).join('')
        return `has(args${steps}.z)`
      }).join(' || ')
    const small = keysOf(paths(4))
    const large = keysOf(paths(14))
    // A key no path names exactly, cut at NUL: not read where paths are followed precisely.
    const text = call('{"q\\u0000":{"a":{"Z":1}}}')
    expect(verdict(small, text)).toBe('ok')
    expect(verdict(large, text)).toBe('case_variant_key')
    expect(verdict(small, call('{"q":{"a":{"b":{"c":{"Z":1}}}}}'))).toBe('case_variant_key')
    expect(verdict(large, call('{"q":{"a":{"b":{"c":{"z":1}}}}}'))).toBe('ok')
  })

  it('a policy set compiles the reads of every conditional rule of a server, and only those', () => {
    const set = policyOf(`
rules:
  - name: mail
    servers: [mail]
    allow: { tools: ["*"] }
  - name: no-bcc
    servers: [mail, other]
    deny: { tools: [send_email] }
    if: 'has(args.bcc)'
  - name: summary-only
    servers: [mail]
    mode: dry-run
    deny: { tools: [export] }
    unless: 'args.opts.mode == "summary"'
`)
    const mail = set.argumentKeys('mail')
    expect(verdict(mail, call('{"Bcc":1}'))).toBe('case_variant_key')
    expect(verdict(mail, call('{"opts":{"Mode":1}}'))).toBe('case_variant_key')
    expect(verdict(set.argumentKeys('other'), call('{"opts":{"Mode":1}}'))).toBe('ok')
    expect(set.argumentKeys('unconditional')).toBeUndefined()
  })
})
