// Lint rules that encode the house rules (CONTRIBUTING.md): layering of the pure core, no global
// fetch or web Response on the data path, no hono `c.var`. Import cycles (type imports included)
// are checked by madge in `npm run lint`; formatting by prettier.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

/** The pure core: protocol, policy, cache, auth and upstream logic, testable without hono. */
const PURE_CORE = [
  'src/mcp/**',
  'src/policy/**',
  'src/cache/**',
  'src/auth/**',
  'src/upstream/**',
  'src/limits/**',
  'src/telemetry/**',
  'src/virtual/**',
  'src/catalog/**',
]

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench/results/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['vitest.config.ts'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // A proxy that forgets a promise turns a failed upstream into an unhandled rejection.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      eqeqeq: ['error', 'always'],
      'no-console': 'error',
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      // hono's `c.var` getter copies every variable into a new object on each access; use c.get().
      'no-restricted-properties': [
        'error',
        {
          object: 'c',
          property: 'var',
          message: 'use c.get(): c.var copies the variable map per access',
        },
        {
          object: 'Readable',
          property: 'toWeb',
          message:
            'web streams on upstream bodies crash on client disconnect (docs/design/hot-path.md)',
        },
      ],
    },
  },
  {
    files: PURE_CORE,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'hono', message: 'the pure core does not import hono' }],
          patterns: [
            { group: ['hono/*', '@hono/*'], message: 'the pure core does not import hono' },
            {
              group: ['**/pipeline/*', '**/env.js', '**/app.js', '**/server.js'],
              message:
                'the pure core does not import the hono app or its stages; move the type to its owner',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/upstream/**', 'src/pipeline/**', 'src/cache/**'],
    rules: {
      // docs/design/hot-path.md: fetch costs 5-10x undici's pool API; web Responses ~1.5x.
      'no-restricted-globals': [
        'error',
        {
          name: 'fetch',
          message: 'use an undici Pool/Agent on the data path (docs/design/hot-path.md)',
        },
        {
          name: 'Response',
          message: "write to Node's ServerResponse on the data path (docs/design/hot-path.md)",
        },
        { name: 'Request', message: 'no web Request on the data path (docs/design/hot-path.md)' },
      ],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts', 'deploy/demo/**/*.ts'],
    rules: { 'no-console': 'off' },
  },
)
