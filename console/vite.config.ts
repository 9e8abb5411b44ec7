/**
 * The console's build: React with the automatic JSX runtime, served by the gateway at /console
 * from dist/console (src/server/console.ts). No inline script or style ends up in index.html, so
 * the gateway's Content-Security-Policy can forbid them.
 */
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/console/',
  plugins: [react()],
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
