// ESLint flat config. A promise escaping its lock (not awaited, or handed to something that
// ignores it) is this library's worst bug class, so lib/ is linted type-aware with
// no-floating-promises and no-misused-promises as errors. Dev dependencies: eslint, typescript-eslint.
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/**', 'build/**', 'coverage/**', 'node_modules/**'] },
  {
    files: ['lib/**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: {
        project: './tsconfig.json',
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // The browser-era globals: a module that forgot to import the SQL escape would call these silently.
      'no-restricted-globals': ['error', 'escape', 'unescape'],
    },
  },
);
