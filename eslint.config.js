// ESLint (flat config): typescript-eslint's recommended rules, and the layer rules of
// DESIGN.md as import restrictions, one block per folder. `npm run lint`, part of `npm run check`.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Forbids, in the files of `folder` (a folder of src/, e.g. `service` or `service/engine`), relative
 * imports that reach the named modules of src/ (`service` means src/service and everything under it;
 * `service/engine` the engine; `app` means src/app.ts), plus the `packages` named and any further
 * `patterns`. A file's depth below src/ fixes how many `../` reach src/, so each depth gets its own
 * block (one `no-restricted-imports` per file: a later block would replace it); `ignores` leaves a
 * subfolder to blocks of its own.
 */
function layer(folder, forbidden, message, packages = [], { ignores = [], patterns = [] } = {}) {
  const names = forbidden.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
  const below = folder.split('/').length;
  return [1, 2, 3].map((level) => ({
    files: [`src/${folder}/${'*/'.repeat(level - 1)}*.ts`],
    ignores,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: packages.map((name) => ({ name, message })),
          patterns: [{ regex: `^${'../'.repeat(below + level - 1)}(${names})(/|\\.js$)`, message }, ...patterns],
        },
      ],
    },
  }));
}

/** Every `eslint-disable` comment says why, after ` -- `, so an exception is a decision a reviewer can read. */
const directiveReason = {
  meta: { type: 'suggestion', schema: [], messages: { missing: 'say why after " -- " in this eslint-disable comment' } },
  create(context) {
    return {
      Program() {
        for (const comment of context.sourceCode.getAllComments()) {
          if (/^\s*eslint-disable(-next-line|-line)?\b/.test(comment.value) && !/ -- \S/.test(comment.value)) {
            context.report({ loc: comment.loc, messageId: 'missing' });
          }
        }
      },
    };
  },
};

const ABOVE_SERVICE = ['schema', 'resolvers', 'subscriptions', 'server', 'metrics', 'cli', 'app', 'index', 'composition-root'];

export default tseslint.config(
  {
    ignores: [
      'dist/',
      'node_modules/',
      'coverage/',
      'console/dist/',
      'console/src/gql/',
      'test-artifacts/',
      '.jobgate/',
      '.doc-snippets-*/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: 'module',
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
      },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // `any` is confined to tests and a few library seams; each is visible in review.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false }],
      'no-empty': ['error', { allowEmptyCatch: true }],
      'prefer-const': ['error', { destructuring: 'all', ignoreReadBeforeAssign: true }],
      // Redaction and input checks match control characters on purpose (NUL, C0, DEL).
      'no-control-regex': 'off',
    },
  },
  // Type-aware, for src only (the type-checked pass costs about 30 s of CPU): a promise nobody
  // awaits or catches is how a worker loses an error, or a shutdown step runs out of order.
  {
    files: ['src/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
    },
  },
  // Layers, one direction only (DESIGN.md): db < service < subscriptions < server; schema and
  // resolvers sit on the service. Adapters (app, index, cli) compose; they never reach SQL.
  ...layer(
    'db',
    ['service', ...ABOVE_SERVICE],
    'src/db is the bottom layer: it imports nothing above it (move the shared piece down into src/db).',
  ),
  // The service's areas sit below the engine: the engine (src/service/engine) runs on them and
  // imports them; an area that needs something of the engine's has it moved down into the area
  // that owns the rule (the outbound policy and templating in endpoints/, the retention windows in
  // retention/). Only the composition roots start the engine.
  ...layer(
    'service',
    ABOVE_SERVICE,
    'src/service imports nothing from the GraphQL, subscription or server layers, nor from the composition roots.',
    [],
    {
      ignores: ['src/service/engine/**'],
      patterns: [
        {
          regex: '^(\\./|(\\.\\./)+)engine/',
          message:
            'A service area never imports the engine: the engine runs on the areas. Move the piece both need into the area that owns its rule, where the engine imports it.',
        },
      ],
    },
  ),
  ...layer(
    'service/engine',
    ABOVE_SERVICE,
    'src/service/engine imports nothing from the GraphQL, subscription or server layers, nor from the composition roots.',
  ),
  ...layer(
    'subscriptions',
    ['server', 'resolvers', 'cli', 'app', 'index', 'composition-root', 'service/engine'],
    'src/subscriptions sits below src/server (the server wires it, never the other way round), and reads the service, never the engine.',
  ),
  ...layer(
    'resolvers',
    ['db', 'subscriptions', 'server', 'cli', 'app', 'index', 'service/engine'],
    'A resolver unpacks its arguments and calls one service function: it imports src/service and schema refs only, never SQL nor the engine.',
    ['kysely', 'pg'],
  ),
  ...layer(
    'server',
    ['db', 'cli', 'app', 'index', 'composition-root', 'service/engine'],
    'src/server is an adapter over the service: it reads the database through the service (src/service/ops/probes.ts), never src/db, and never reaches into the engine.',
  ),
  ...layer(
    'metrics',
    ['db', 'server', 'subscriptions', 'resolvers', 'schema', 'cli', 'app', 'index', 'composition-root', 'service/engine'],
    'src/metrics adapts the observer (src/service/kernel/observer.ts) to Prometheus: what it reads of the database comes through the service (src/service/ops/probes.ts), never src/db.',
  ),
  ...layer(
    'schema',
    ['db', 'server', 'cli', 'app', 'index', 'service/engine'],
    'GraphQL types describe the service; they hold no SQL, no transport and nothing of the engine.',
    ['kysely', 'pg'],
  ),
  // src/db is the only place SQL is written (DESIGN.md): the service calls repositories and
  // statements, it never holds SQL text nor builds a query.
  {
    files: ['src/service/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "ImportDeclaration[source.value='kysely'] > ImportSpecifier[imported.name='sql']",
          message: 'SQL belongs in src/db: write it in a repository (src/db/repositories) or a statement (src/db/statements) and call it.',
        },
        {
          selector: 'CallExpression[callee.property.name=/^(selectFrom|insertInto|updateTable|deleteFrom|mergeInto)$/]',
          message: 'Queries are built in src/db: add a repository or statement function and call it.',
        },
        {
          selector: "CallExpression[callee.property.name='query'][arguments.0.type=/Literal$/]",
          message: 'SQL text belongs in src/db: add a statement function and call it.',
        },
      ],
    },
  },
  // Size: a file over 400 lines or a function over 80 holds more than one thing. A function that
  // must stay long says why on the line above, in the disable comment's reason (`-- why`), which
  // jobgate/directive-reason insists on.
  {
    files: ['src/**/*.ts'],
    plugins: { jobgate: { rules: { 'directive-reason': directiveReason } } },
    rules: {
      'max-lines': ['error', { max: 400, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true, IIFEs: true }],
      'jobgate/directive-reason': 'error',
    },
  },
  // Generated from the migrated schema (npm run db:types): one interface per table, as long as the schema is.
  { files: ['src/db/schema.generated.ts'], rules: { 'max-lines': 'off' } },
  {
    files: ['src/app.ts', 'src/index.ts', 'src/composition-root.ts', 'src/cli/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./|\\./)db/(repositories|statements)/',
              message: 'Composition roots call the service, not a repository or a statement.',
            },
          ],
        },
      ],
    },
  },
);
