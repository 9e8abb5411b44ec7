/**
 * The console's build: React with the automatic JSX runtime, served by the gateway at /console
 * from dist/console (src/server/console.ts). No inline script or style ends up in index.html, so
 * the gateway's Content-Security-Policy can forbid them. The codegen's manifest of the console's
 * documents goes into the build beside them: the gateway trusts those hashes, and the console
 * sends the hashes alone (src/server/persisted-queries.ts).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig, type Plugin } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

/** dist/console/persisted-documents.json, from console/src/gql (written by `npm run console:codegen`). */
function persistedDocuments(): Plugin {
  return {
    name: 'jobgate-persisted-documents',
    apply: 'build',
    generateBundle() {
      const source = readFileSync(fileURLToPath(new URL('./src/gql/persisted-documents.json', import.meta.url)), 'utf8');
      this.emitFile({ type: 'asset', fileName: 'persisted-documents.json', source });
    },
  };
}

export default defineConfig({
  root,
  base: '/console/',
  plugins: [react(), persistedDocuments()],
  publicDir: false,
  // `npm run console:dev`: the API (and its WebSocket) of a running gateway, JOBGATE_URL or :4000.
  server: {
    proxy: { '/graphql': { target: process.env.JOBGATE_URL ?? 'http://127.0.0.1:4000', ws: true } },
  },
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    assetsDir: 'assets',
    // The polyfill would be an inline script; every browser the console supports has modulepreload.
    modulePreload: { polyfill: false },
    target: 'es2022',
    sourcemap: false,
    reportCompressedSize: false,
  },
});
