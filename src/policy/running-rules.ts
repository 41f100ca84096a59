/**
 * The rules of the policy a reload replaces, as its reader is told of them (docs/policy.md §Hot
 * reload): where each was read and its id (`name#<hash of its content>`). The reader
 * (policy-reader.ts) finds each rule it reads among them, and sends the place of an unchanged one
 * instead of the rule: an edit changes a few rules of thousands, and the serving thread then
 * neither copies the others into its heap (the copy of 10,000 rules cost it 22–45 ms) nor
 * compiles them again, but takes the running compiled rule. A rule holds nothing of the policy
 * it was compiled for, so two policies can share it.
 */

/** Where each running rule was read (`policies/a.yaml rules[2]`) and its id, in rule order. */
export interface RunningList {
  readonly sources: readonly string[]
  readonly ids: readonly string[]
}

/**
 * The running rules as the reader is told of them: listed, or, when they are exactly the rules
 * of the reader's own last read, that read's number. The list of 10,000 rules is two arrays of
 * 10,000 strings, made and copied to the reader by the serving thread in one step of 1–2 ms;
 * after a reload through the same reader, which is most of them, the reader has it already.
 */
export type RunningRef = RunningList | { readonly read: number }

/** Finds a rule just read among the running ones. */
export class RunningRules {
  private bySource: Map<string, number> | undefined
  private byId: Map<string, number> | undefined

  constructor(private readonly running: RunningList) {}

  /**
   * The place in the running list of the rule read at `at` from `source` with `id`, when it is
   * unchanged from it: read from the same place, with the same id, so the same content.
   */
  find(at: number, source: string, id: string): number | undefined {
    const { sources, ids } = this.running
    // Most edits leave every rule where it was; a rule added to an earlier file moves the rest.
    const k =
      sources[at] === source
        ? at
        : (this.bySource ??= new Map(sources.map((s, i) => [s, i]))).get(source)
    return k !== undefined && ids[k] === id ? k : undefined
  }

  /**
   * The place in the running list of the rule with `id`, read from anywhere: the same content
   * (the id hashes it) under the same name, which a folder holds once. An edit that adds a rule
   * before others moves them to new places, where find() does not look.
   */
  moved(id: string): number | undefined {
    return (this.byId ??= new Map(this.running.ids.map((d, i) => [d, i]))).get(id)
  }
}
