// ESLint's recommended rules over the viewer's modules (src/serve/viewer/), which run in a
// browser as native ES modules. Run from the repository's root: tests/viewer_check.sh.
import js from '@eslint/js';
import globals from 'globals';

export default [
  {
    files: ['src/serve/viewer/**/*.js'],
    ...js.configs.recommended,
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'module',
      globals: globals.browser,
    },
  },
];
