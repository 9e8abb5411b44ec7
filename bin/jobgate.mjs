#!/usr/bin/env node
// The CLI runs the compiled build in `dist/` (made by `npm run build`, which `npm install` in a
// checkout and `npm pack` run through `prepare` / `prepack`); `npm start` rebuilds it first when
// a source is newer.
await import('../dist/cli/main.js');
