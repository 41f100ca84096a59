/**
 * A name as a loose matcher may read it: compatibility-normalised (NFKC), lower-cased, without
 * white space. Two names with one fold are one name to such a backend.
 */
export function foldName(name: string): string {
  return name.normalize('NFKC').toLowerCase().replace(/\s+/gu, '')
}
