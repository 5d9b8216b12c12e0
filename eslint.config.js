import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import maxFunctionLines from './eslint-rules/max-function-lines.js';

export default tseslint.config(
  { ignores: ['node_modules/**', 'data/**', '.tmp/**', 'coverage/**', 'packages/*/dist/**', 'dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { process: 'readonly', Buffer: 'readonly', console: 'readonly', URL: 'readonly', fetch: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly' },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  {
    files: ['scripts/**', 'bench/**'],
    rules: { 'no-console': 'off' },
  },
  // Functions of at most 70 lines (TIGER_STYLE); the functions longer than that when the rule came in are
  // listed by name in eslint-rules/long-functions.json, and the list may only shrink.
  {
    files: ['**/*.ts', '**/*.js'],
    plugins: { local: { rules: { 'max-function-lines': maxFunctionLines } } },
    rules: { 'local/max-function-lines': ['error', { max: 70, offenders: 'eslint-rules/long-functions.json' }] },
  },
  // Dependencies point down (docs/architecture.md): the platform imports nothing of the service, and the
  // HTTP layer only the platform. What they need from the modules comes through ports (src/http/ports.ts).
  {
    files: ['src/platform/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ regex: '^\\.\\./', message: 'src/platform imports nothing of the service: move what it needs into the platform, or pass it in.' }] }] },
  },
  {
    files: ['src/http/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: '^\\.\\./(?!platform/)', message: 'src/http imports only the platform: a module it needs is a port in src/http/ports.ts.' }] }],
    },
  },
);
