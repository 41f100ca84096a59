/**
 * How active-check results reach every worker process when the gateway runs several
 * (docs/operations.md §Workers): one process, the checker, probes each replica; the others take
 * the state it publishes, so a backend sees one probe per interval whatever the worker count.
 * Passive ejection stays per process: each one judges the traffic it carries.
 */
export interface HealthShare {
  /** True in the one process that runs the active checks. */
  readonly checker: boolean
  /** The checker's result after every probe of the replica at `url` of `server`. */
  publish(server: string, url: string, down: boolean, reason: string): void
  /** The last published result, for a replica built after it (a reload, a restarted worker). */
  known(
    server: string,
    url: string,
  ): { readonly down: boolean; readonly reason: string } | undefined
}
