/**
 * The JSON paths of `audit.redaction.paths` (docs/operations.md "Audit log"): a strict subset of
 * JSONPath (RFC 9535) rooted at the call's arguments. `$` then one or more segments: `.name`
 * (a member whose name is `[A-Za-z0-9_-]+`), `.*` (any member), `[3]` (an array element), `[*]`
 * (any element). Nothing else: no recursive descent, no filters, no quoted names, so a path means
 * one thing and a typo is a config error, not a path that silently matches nothing.
 */

/** One step of a path: a member name, an array index, or any member or element. */
export type PathSegment =
  | { readonly kind: 'name'; readonly name: string }
  | { readonly kind: 'index'; readonly index: number }
  | { readonly kind: 'anyMember' }
  | { readonly kind: 'anyElement' }

const SEGMENT = /\.([A-Za-z0-9_-]+|\*)|\[(0|[1-9][0-9]{0,8}|\*)\]/y

/** The segments of a path, or a message saying why it is not one. */
export function parseRedactPath(path: string): PathSegment[] | string {
  if (!path.startsWith('$')) return 'a path starts with $ (the arguments)'
  const segments: PathSegment[] = []
  SEGMENT.lastIndex = 1
  while (SEGMENT.lastIndex < path.length) {
    const at = SEGMENT.lastIndex
    const m = SEGMENT.exec(path)
    if (m === null) {
      return `unexpected ${JSON.stringify(path.slice(at, at + 8))} at ${at}: segments are .name, .*, [n] or [*]`
    }
    const [, member, element] = m
    if (member === '*') segments.push({ kind: 'anyMember' })
    else if (member !== undefined) segments.push({ kind: 'name', name: member })
    else if (element === '*') segments.push({ kind: 'anyElement' })
    else segments.push({ kind: 'index', index: Number(element) })
  }
  if (segments.length === 0) return '$ alone is every argument: use audit.arguments: none'
  return segments
}
