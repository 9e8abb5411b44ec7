#!/usr/bin/env node
// The installed CLI runs the compiled build (`npm run build`); in a checkout, `npm start` and
// the other npm scripts run the TypeScript sources directly.
await import('../dist/cli/main.js');
