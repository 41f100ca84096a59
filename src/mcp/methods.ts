/**
 * The methods whose results carry cache hints (caching.mdx §Cacheable Results): discovery and the
 * list and read methods. All of them only read, which retries rely on too.
 */
export const CACHEABLE_METHODS: ReadonlySet<string> = new Set([
  'server/discover',
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
])
