import js from "@eslint/js";
import globals from "globals";
import reactHooks from "eslint-plugin-react-hooks";
import reactRefresh from "eslint-plugin-react-refresh";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist", "node_modules", "src/generated", "test-results", "playwright-report"] },
  {
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    files: ["**/*.{ts,tsx}"],
    languageOptions: { ecmaVersion: 2022, globals: { ...globals.browser, ...globals.node } },
    plugins: { "react-hooks": reactHooks, "react-refresh": reactRefresh },
    rules: {
      ...reactHooks.configs.recommended.rules,
      "react-refresh/only-export-components": ["warn", { allowConstantExport: true }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["../generated/*", "../../generated/*"],
              message: "import generated types through '@/generated/api'",
            },
          ],
        },
      ],
    },
  },
  {
    // the generated client types the API's data: a double cast (`x as unknown as T`) would
    // claim a shape nothing checks; narrow with a type guard instead. `any` is refused too
    // (typescript-eslint's recommended no-explicit-any). Tests may build partial fixtures.
    files: ["src/**/*.{ts,tsx}"],
    ignores: ["src/**/*.test.{ts,tsx}", "src/test/**"],
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "no-restricted-syntax": [
        "error",
        {
          selector: "TSAsExpression > TSAsExpression[typeAnnotation.type='TSUnknownKeyword']",
          message:
            "no `as unknown as`: type the data at its source (the API's schema) or narrow it with a type guard",
        },
      ],
    },
  },
  {
    files: ["src/features/**"],
    rules: {
      // imports flow shared -> features -> app; features do not import each other or app/
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { group: ["@/app/*"], message: "features must not import from app/" },
            {
              group: ["@/features/*"],
              message: "features do not import each other; compose them in app/",
            },
          ],
        },
      ],
    },
  },
);
