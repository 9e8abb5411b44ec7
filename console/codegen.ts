/**
 * Types every operation of the console from the checked-in schema.graphql. `npm run check` runs
 * this and then the console's typecheck, so a schema change that breaks a screen fails the check.
 * Each document also gets its SHA-256 (the console sends the hash alone) and a manifest of them,
 * persisted-documents.json, which the build hands to the gateway (console/vite.config.ts).
 */
import type { CodegenConfig } from '@graphql-codegen/cli';

const config: CodegenConfig = {
  schema: 'schema.graphql',
  documents: ['console/src/**/*.{ts,tsx}', '!console/src/gql/**'],
  ignoreNoDocuments: false,
  generates: {
    'console/src/gql/': {
      preset: 'client',
      presetConfig: { fragmentMasking: false, persistedDocuments: { hashAlgorithm: 'sha256' } },
      config: {
        // Operations go over fetch and graphql-ws as strings: no parsed AST in the bundle.
        documentMode: 'string',
        enumsAsTypes: true,
        useTypeImports: true,
        scalars: { DateTime: 'string', JSON: 'unknown' },
      },
    },
  },
  silent: true,
};

export default config;
