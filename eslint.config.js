/**
 * Lint: a small set of rules that catch real bugs, and the sandbox boundary of the workflow code.
 *
 * Type-aware (the TypeScript project service reads tsconfig.json), so promise rules see what a call returns.
 * The base is eslint:recommended, not typescript-eslint's recommended-type-checked: that one mostly flags `any`
 * from the SDK and pg typings, noise here; the promise rules are the part of it that finds bugs.
 * The import layers as a whole are checked by test/unit/layers.test.ts; here the editor sees the sandbox part
 * of them as you type.
 */
import { builtinModules } from 'node:module';
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** Where the code runs in Temporal's deterministic workflow sandbox, bundled without Node or the worker. */
const SANDBOXED = ['src/workflows/**/*.ts', 'src/contracts/**/*.ts'];

const SANDBOX_MESSAGE =
  'not for the workflow sandbox (deterministic, bundled without Node): do this in an activity, or import it from src/contracts/';

/** Node built-ins by bare name (`fs`, `fs/promises`, `crypto`, ...); `node:*` is caught by a pattern below. */
const bareBuiltins = builtinModules.filter((name) => !name.startsWith('_') && !name.startsWith('node:'));

/** Packages that belong to the worker, the client or the activities, never to the workflow bundle. */
const workerSidePackages = [
  'pg',
  '@temporalio/activity',
  '@temporalio/client',
  '@temporalio/worker',
  '@temporalio/testing',
];

/** no-restricted-imports options for a sandboxed folder; `allowActivityTypes` for the workflows. */
function sandboxImports({ allowActivityTypes }) {
  // Both folders are flat, so a relative import leaves them exactly when it starts with `../` and names another folder.
  const allowedFolders = allowActivityTypes ? 'contracts|workflows|activities' : 'contracts|workflows';
  return {
    paths: [
      ...bareBuiltins.map((name) => ({ name, message: `Node built-in "${name}": ${SANDBOX_MESSAGE}` })),
      ...workerSidePackages.map((name) => ({ name, message: `"${name}": ${SANDBOX_MESSAGE}` })),
    ],
    patterns: [
      { regex: '^node:', message: `Node built-ins: ${SANDBOX_MESSAGE}` },
      {
        regex: `^\\.\\./(?!(${allowedFolders})/)`,
        message: `only src/contracts/ and src/workflows/ are imported here; the rest of src/ is ${SANDBOX_MESSAGE}`,
      },
      ...(allowActivityTypes
        ? [
            {
              // The SDK idiom `proxyActivities<Activities>()`: the compiler erases an `import type`.
              regex: '^\\.\\./activities/',
              allowTypeImports: true,
              message: 'workflows name activities by type only: `import type`, then call them through proxyActivities',
            },
          ]
        : []),
    ],
  };
}

export default defineConfig(
  { ignores: ['node_modules/', 'dist/', 'bench/results/', '.data/', 'scratch/'] },

  js.configs.recommended,

  {
    files: ['**/*.js'],
    languageOptions: { globals: globals.node },
  },
  // The merchant portal's script runs in the merchant's browser.
  {
    files: ['src/api/portal/*.js'],
    languageOptions: { globals: globals.browser },
  },

  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.eslintRecommended],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      // A promise nobody awaits loses its rejection: await it, or `void` it and say why.
      '@typescript-eslint/no-floating-promises': 'error',
      // An async callback where a void one is expected (an event handler) rejects into nowhere.
      '@typescript-eslint/no-misused-promises': 'error',
      // With verbatimModuleSyntax, `import { type A } from 'x'` still loads x; `import type` does not.
      '@typescript-eslint/no-import-type-side-effects': 'error',
      // The core rule does not understand types (it flags parameter names in function types); this one does.
      'no-unused-vars': 'off',
      // `_name` marks an unused parameter; `const { dropped, ...rest } = x` drops a field on purpose.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', ignoreRestSiblings: true, caughtErrors: 'none' },
      ],
    },
  },

  {
    files: SANDBOXED,
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', sandboxImports({ allowActivityTypes: false })],
    },
  },
  {
    files: ['src/workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', sandboxImports({ allowActivityTypes: true })],
    },
  },
);
