// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
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
    files: ['**/*.mjs', '**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { ...tseslint.configs.disableTypeChecked.languageOptions, globals: globals.node },
  },
);
