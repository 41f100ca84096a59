/** Milliseconds since the epoch; `Date.now` in production, a hand-moved clock in tests. */
export type Clock = () => number
