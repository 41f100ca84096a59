/**
 * Whether a response's raw id is the request's id: the same JSON value (JSON-RPC 2.0 §5: the
 * response id MUST be the same as the request's). Compared on the raw text as `findTopLevelId`
 * gives it (a string, or an integer in digits): integers of any size compare by their digits,
 * never through a rounding double (2^53 + 1 is not 2^53), and strings compare after unescaping
 * (`"a"` and `"\u0061"` are one id). `response` undefined (no id, an id that is not a string or
 * an integer, or a repeated id) never matches.
 */
export function sameId(request: string, response: string | undefined): boolean {
  if (response === undefined) return false
  if (request === response) return true
  // JSON integers have one spelling (no leading zeros, no '+'); only strings have several.
  if (request.charCodeAt(0) !== 0x22 || response.charCodeAt(0) !== 0x22) return false
  try {
    return JSON.parse(request) === JSON.parse(response)
  } catch {
    return false
  }
}
