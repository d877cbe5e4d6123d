// `npm run lint` (and the lint suite of `make test`): typescript-eslint's recommended rules and
// the two rules of eslint-plugin-react-hooks that guard hooks, over the UI's sources.
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import reactHooks from "eslint-plugin-react-hooks";
import globals from "globals";
import tseslint from "typescript-eslint";

export default defineConfig(
  { ignores: ["dist", "src/api/schema.ts"] },
  {
    files: ["src/**/*.{ts,tsx}"],
    extends: [js.configs.recommended, tseslint.configs.recommended],
    plugins: { "react-hooks": reactHooks },
    languageOptions: { globals: globals.browser },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      "react-hooks/rules-of-hooks": "error",
      // An error, not a warning: a missing dependency is a stale closure, and warnings scroll by.
      "react-hooks/exhaustive-deps": "error",
      // As tsc's noUnusedLocals: `{ dropped: _x, ...rest }` omits a field on purpose.
      "@typescript-eslint/no-unused-vars": ["error", { ignoreRestSiblings: true, argsIgnorePattern: "^_" }],
    },
  },
);
