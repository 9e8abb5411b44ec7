/**
 * `print`: writes the SDL to schema.graphql. `check`: fails when schema.graphql is stale.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { printSdl } from '../src/schema/index.js';

const file = fileURLToPath(new URL('../schema.graphql', import.meta.url));
const mode = process.argv[2];
const sdl = printSdl();

if (mode === 'print') {
  writeFileSync(file, sdl);
  console.log(`wrote ${file}`);
} else if (mode === 'check') {
  let current = '';
  try {
    current = readFileSync(file, 'utf8');
  } catch {
    // missing counts as stale
  }
  if (current !== sdl) {
    console.error('schema.graphql is stale: run `npm run schema:print` and commit it.');
    process.exit(1);
  }
  console.log('schema.graphql is up to date');
} else {
  console.error('usage: schema.ts print|check');
  process.exit(2);
}
