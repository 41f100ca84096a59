// Lint rules that encode the house rules (CONTRIBUTING.md): layering of src/ folders, no global
// fetch or web Response on the data path, no hono `c.var`. Import cycles (type imports included)
// are checked by madge in `npm run lint`; formatting by prettier.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

/**
 * The layers of src/, bottom to top: the one written copy (CONTRIBUTING.md "Layering" and
 * docs/design/member-path.md refer here). A partial order: a folder imports only folders of lower
 * tiers, type imports included, so no two folders know each other; folders that never meet share
 * a tier (neither may import the other). `errors`, `app`, `server` and `cli` include the files of
 * that name in src/.
 */
const TIERS = [
  ['errors', 'redis'],
  ['mcp'],
  ['config'],
  ['match'],
  ['auth', 'limits'],
  ['policy', 'cards'],
  ['observability'],
  ['telemetry', 'upstream', 'userauth'],
  ['endpoint'],
  ['client'],
  ['cache', 'catalog'],
  ['virtual'],
  ['runtime'],
  ['status', 'pipeline'],
  ['cluster', 'app'],
  ['server'],
  ['cli'],
]
const LAYERS = TIERS.flat()
/** The folders a folder may not import: the rest of its tier and every tier above it. */
const notBelow = (folder) => {
  const tier = TIERS.findIndex((t) => t.includes(folder))
  return TIERS.slice(tier)
    .flat()
    .filter((f) => f !== folder)
}

/** The pure core: every folder below runtime/, testable without hono. */
const PURE_CORE = LAYERS.slice(1, LAYERS.indexOf('runtime')).map((f) => `src/${f}/**`)
/**
 * Above runtime/ but hono-free too: the status model (src/status/, tested without a request).
 * Only its HTTP layer, src/status/web/ (the admin listener's routes and the page they render),
 * imports hono; HONO_ALLOWED lists that exception, and nothing else under status/ has it.
 */
const HONO_FREE = [...PURE_CORE, 'src/status/**']
const HONO_ALLOWED = { 'src/status/**': ['src/status/web/**'] }

const HONO_BAN = [
  {
    group: ['hono', 'hono/*', '@hono/*'],
    message: 'the pure core and the status model do not import hono',
  },
]
/** Markup comes from html`` only (src/status/web/html.ts); hono's `raw` would skip the escaping. */
const RAW_BAN = [
  {
    name: 'hono/html',
    importNames: ['raw'],
    message: 'status markup is built with html`` (src/status/web/html.ts), never raw()',
  },
]

/**
 * One `no-restricted-imports` block per folder: what is above it, and hono for the core; a
 * folder with a HONO_ALLOWED exception gets a second block for those files, layering kept.
 */
function layerRules() {
  const isFolder = (f) => !['errors', 'app', 'server', 'cli'].includes(f)
  return LAYERS.filter(isFolder).flatMap((folder) => {
    const above = notBelow(folder)
    const up = above.flatMap((f) => [`../${f}/*`, `../${f}.js`, `../../${f}/*`, `../../${f}.js`])
    const patterns = [
      {
        group: up,
        message: `${folder}/ imports only folders of lower tiers (eslint.config.js TIERS); move the code or the type to its owner`,
      },
    ]
    const files = `src/${folder}/**`
    const core = HONO_FREE.includes(files)
    const allowed = HONO_ALLOWED[files] ?? []
    const rule = (banHono) => ({
      'no-restricted-imports': [
        'error',
        { patterns: banHono ? [...HONO_BAN, ...patterns] : patterns, paths: RAW_BAN },
      ],
    })
    return [
      { files: [files], ignores: allowed, rules: rule(core) },
      ...(allowed.length === 0 ? [] : [{ files: allowed, rules: rule(false) }]),
    ]
  })
}

/**
 * One admission, one send (docs/design/member-path.md): the attempt loop is driven by the one
 * send (src/endpoint/send.ts) and a policy decision is taken by the one judge (src/endpoint/judge.ts),
 * which endpoint/admit.ts calls; every other caller goes through a server's endpoint.
 */
const ONE_SEND = {
  selector: "ImportDeclaration[importKind!='type'][source.value=/upstream\\/attempts(\\.js)?$/]",
  message:
    'only src/endpoint/send.ts runs the attempt loop: send through the server endpoint (endpoint/endpoint.ts)',
}
const ONE_JUDGE = {
  selector:
    "CallExpression[callee.property.name='check'][callee.object.name='policy'], CallExpression[callee.property.name='check'][callee.object.property.name='policy']",
  message:
    'only src/endpoint/judge.ts takes policy decisions: admit through the server endpoint (endpoint/admit.ts)',
}
const SEND_HOME = ['src/endpoint/send.ts', 'src/upstream/**']
const JUDGE_HOME = ['src/endpoint/judge.ts', 'src/policy/**']

function doorRules() {
  return [
    {
      files: ['src/**/*.ts'],
      ignores: [...SEND_HOME, ...JUDGE_HOME],
      rules: { 'no-restricted-syntax': ['error', ONE_SEND, ONE_JUDGE] },
    },
    { files: SEND_HOME, rules: { 'no-restricted-syntax': ['error', ONE_JUDGE] } },
    { files: JUDGE_HOME, rules: { 'no-restricted-syntax': ['error', ONE_SEND] } },
  ]
}

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
  ...layerRules(),
  ...doorRules(),
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
