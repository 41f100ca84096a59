import { GatewayError } from '../errors.js'
import {
  applyHooks,
  notSeen,
  readJudged,
  serialize,
  tooLarge,
  type ResultHook,
} from './answer-hooks.js'
import { AnswerScan, answerProblem, type ExpectedId } from './answer-scan.js'
import type { BodyTransform } from './body-transform.js'

/**
 * The three readings of an `application/json` answer (answer-hooks.ts `HookMode`). Each scans
 * the bytes as they pass (answer-scan.ts), so none hands the client a body that is not the
 * answer to its request: before the head is out that is a 502 with the reason, after it (a body
 * too large to hold) the connection is broken instead of the body completed.
 */

/** Checks the answer as it streams; the last chunk waits for the verdict. */
export class JsonPass implements BodyTransform {
  readonly streaming = false
  readonly exact = true
  private readonly scan = new AnswerScan()
  private last: Buffer | undefined

  constructor(
    private readonly expected: ExpectedId,
    private readonly status: number,
  ) {}

  push(chunk: Buffer): Buffer | undefined {
    this.scan.push(chunk)
    const previous = this.last
    this.last = chunk
    return previous
  }

  end(): Buffer | undefined {
    const problem = answerProblem(this.scan.end(), this.expected, this.status)
    if (problem !== undefined) throw new GatewayError(problem)
    return this.last
  }
}

/**
 * Observe mode: the body is held (bounded) so the hooks can look at it once it is whole; past
 * `maxBytes` it is flushed and the rest relayed as it comes, unobserved but still checked.
 */
export class JsonTee implements BodyTransform {
  readonly streaming = false
  readonly exact = true
  private readonly scan = new AnswerScan()
  private chunks: Buffer[] | undefined = []
  private size = 0
  private last: Buffer | undefined

  constructor(
    private readonly maxBytes: number,
    private readonly hooks: readonly ResultHook[],
    private readonly expected: ExpectedId,
    private readonly status: number,
  ) {}

  push(chunk: Buffer): Buffer | undefined {
    this.scan.push(chunk)
    if (this.chunks === undefined) {
      const previous = this.last
      this.last = chunk
      return previous
    }
    this.size += chunk.length
    this.chunks.push(chunk)
    if (this.size <= this.maxBytes) return undefined
    // Too large to look at: relay what was held, keeping the newest chunk for the verdict.
    const held = Buffer.concat(this.chunks, this.size - chunk.length)
    this.chunks = undefined
    this.last = chunk
    notSeen(this.hooks)
    return held
  }

  end(): Buffer | undefined {
    const shape = this.scan.end()
    const problem = answerProblem(shape, this.expected, this.status)
    if (problem !== undefined) throw new GatewayError(problem)
    if (this.chunks === undefined) return this.last
    const raw = Buffer.concat(this.chunks, this.size)
    if (shape.object && shape.response) {
      let parsed: unknown
      try {
        parsed = JSON.parse(raw.toString('utf8'))
      } catch {
        return raw // `NaN` and the like: nothing to observe; relayed as the backend sent it.
      }
      applyHooks(parsed as Record<string, unknown>, this.hooks, false)
    }
    return raw
  }
}

/** Rewrite mode: the whole body is held (bounded), then read strictly and possibly replaced. */
export class JsonResult implements BodyTransform {
  readonly streaming = false
  private readonly scan = new AnswerScan()
  private readonly chunks: Buffer[] = []
  private size = 0

  constructor(
    private readonly maxBytes: number,
    private readonly hooks: readonly ResultHook[],
    private readonly expected: ExpectedId,
    private readonly status: number,
  ) {}

  push(chunk: Buffer): undefined {
    this.size += chunk.length
    // A bounded buffer: an answer too large to inspect is refused, never silently passed unfiltered.
    if (this.size > this.maxBytes) throw tooLarge('response')
    this.scan.push(chunk)
    this.chunks.push(chunk)
  }

  end(): Buffer {
    const shape = this.scan.end()
    const problem = answerProblem(shape, this.expected, this.status)
    if (problem !== undefined) throw new GatewayError(problem)
    const raw = Buffer.concat(this.chunks, this.size)
    const text = raw.toString('utf8')
    const out = applyHooks(readJudged(text, shape), this.hooks, false)
    return out === undefined ? raw : Buffer.from(serialize(out, shape.rawId))
  }
}
