// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';
import { builtinModules } from 'node:module';
import globals from 'globals';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

/** What shipped code (src/) may never import. */
const sourceOnlyBans = ['**/tools/**', '**/test/**', '**/bench/**', '**/scripts/**'];

/** What deterministic workflow code may never import. */
const workflowBans = [
  { group: nodeBuiltins, message: 'Workflow code runs in the deterministic sandbox: no Node builtins.' },
  {
    group: ['undici', 'node-fetch', 'axios', '**/activities/*', '!**/activities/index.js'],
    message: 'Workflow code may not do I/O; import activities as types only (proxyActivities<typeof …>).',
  },
  { group: sourceOnlyBans, message: 'src/ may not import from tools/, test/, bench/ or scripts/.' },
  {
    group: ['**/proxy/**', '**/webhooks/**', '**/worker.js', '**/client.js', '**/cli.js', '**/config.js'],
    message: 'Not in workflow code.',
  },
];

/**
 * The layers of src/, top to bottom, as docs/development.md draws them under its room picture (test/unit/readme.test.ts
 * checks that the two agree and that no import in src/ runs up). An import points down or sideways, never up.
 */
export const layers = [
  ['src/cli.ts', 'src/index.ts', 'src/testing.ts'],
  ['src/dev/', 'src/demo/', 'src/webhooks/', 'src/proxy/', 'src/sim/'],
  ['src/client.ts', 'src/worker.ts', 'src/config.ts'],
  ['src/temporal/'],
  ['src/load-control/'],
  ['src/workflows/'],
  ['src/activities/'],
  [
    'src/policy/',
    'src/failures.ts',
    'src/errors.ts',
    'src/intent.ts',
    'src/intent-status.ts',
    'src/intent-limits.ts',
    'src/validation-words.ts',
    'src/settings.ts',
    'src/credential-config.ts',
    'src/webhook-config.ts',
    'src/served-credentials.ts',
    'src/task-queues.ts',
    'src/search-attributes.ts',
    'src/workflow-ids.ts',
    'src/duration.ts',
    'src/canonical-json.ts',
    'src/stop-signals.ts',
  ],
];

/**
 * `import-x/no-restricted-paths` zones: a room may import nothing from the rooms of the layers above it (one zone per
 * room and room above, so that the message names both).
 */
function layerZones() {
  const dir = (room) => room.replace(/\/$/, '');
  return layers.slice(1).flatMap((layer, i) =>
    layer.flatMap((room) =>
      layers
        .slice(0, i + 1)
        .flat()
        .map((above) => ({
          target: dir(room),
          from: dir(above),
          message: `layers only point down: ${room} may not import ${above}, a layer above it (docs/development.md).`,
        })),
    ),
  );
}

/** Code-health rules for all of src/ (one error home, public SDK APIs only, one stop-signal listener). */
const healthSyntax = [
  {
    selector: 'ClassDeclaration[superClass.name=/Error$/]',
    message: 'Errors live in src/errors.ts: extend RetryqError there, with a stable `code` and an …Error name.',
  },
  {
    selector: "MemberExpression[object.name='TestWorkflowEnvironment'][property.name='create']",
    message: "TestWorkflowEnvironment.create is the SDK's private factory: use createTimeSkipping/createLocal options.",
  },
  {
    selector:
      "CallExpression[callee.object.name='process'][callee.property.name=/^(on|once)$/][arguments.0.value=/^SIG/]",
    message: 'Stop signals are heard in one place: untilStopped() in src/stop-signals.ts.',
  },
];

export default tseslint.config(
  { ignores: ['node_modules/**', '.tools/**', '.data/**', 'dist/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'separate-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'import-x/no-cycle': 'error',
    },
  },
  {
    // Production code never reaches into scripts or tests: src/ is what ships.
    files: ['src/**/*.ts'],
    ignores: ['src/workflows/**', 'src/policy/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [{ group: sourceOnlyBans, message: 'src/ may not import from tools/, test/, bench/ or scripts/.' }],
        },
      ],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/errors.ts', 'src/stop-signals.ts', 'src/policy/**'],
    rules: { 'no-restricted-syntax': ['error', ...healthSyntax] },
  },
  {
    files: ['src/errors.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'ClassDeclaration[superClass.name=/Error$/][id.name!=/Error$/]',
          message: 'Error class names end in Error.',
        },
        {
          selector: "ClassDeclaration[superClass.name='Error'][id.name!='RetryqError']",
          message: 'Every retryq error extends RetryqError (a stable `code`).',
        },
      ],
    },
  },
  {
    files: ['src/workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { patterns: workflowBans.map((b) => ({ ...b, allowTypeImports: true })) },
      ],
    },
  },
  {
    files: ['src/policy/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            ...workflowBans.map((b) => ({ ...b, allowTypeImports: false })),
            { group: ['@temporalio/*'], message: 'The policy core is pure: no Temporal imports.' },
            { group: ['zod'], message: 'The policy core is pure: validation belongs at the boundaries.' },
          ],
        },
      ],
      'no-restricted-syntax': [
        'error',
        ...healthSyntax,
        {
          selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']",
          message: 'No clock in the policy core: take `now` as a parameter.',
        },
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'No clock in the policy core: take `now` as a parameter.',
        },
        {
          selector: "CallExpression[callee.name='Date']",
          message: 'No clock in the policy core: take `now` as a parameter.',
        },
        {
          selector: "CallExpression[callee.object.name='Math'][callee.property.name='random']",
          message: 'No randomness in the policy core: take `random` as a parameter.',
        },
      ],
    },
  },
  {
    // Layers only point down: resolve `./x.js` to the TypeScript source, as tsc does, to know which room it is in.
    files: ['src/**/*.ts'],
    settings: {
      'import-x/resolver-next': [
        createNodeResolver({ extensions: ['.ts', '.js', '.json'], extensionAlias: { '.js': ['.ts', '.js'] } }),
      ],
    },
    rules: { 'import-x/no-restricted-paths': ['error', { basePath: import.meta.dirname, zones: layerZones() }] },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { ...tseslint.configs.disableTypeChecked.languageOptions, globals: globals.node },
  },
);
