/**
 * `print`: writes the SDL to schema.graphql. `check`: fails when schema.graphql is stale.
 * `policy`: fails when the SDL breaks a client of the last release (schema.released.graphql)
 * in a way the change policy refuses (see scripts/schema-policy.ts and the README).
 * `release`: makes the current SDL the released baseline; run it when a release is cut.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { printSdl } from '../src/schema/index.js';
import { checkSchemaChange } from './schema-policy.js';

const file = fileURLToPath(new URL('../schema.graphql', import.meta.url));
const released = fileURLToPath(new URL('../schema.released.graphql', import.meta.url));
const mode = process.argv[2];
const sdl = printSdl();

const read = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

if (mode === 'print') {
  writeFileSync(file, sdl);
  console.log(`wrote ${file}`);
} else if (mode === 'check') {
  if (read(file) !== sdl) {
    console.error('schema.graphql is stale: run `npm run schema:print` and commit it.');
    process.exit(1);
  }
  console.log('schema.graphql is up to date');
} else if (mode === 'policy') {
  const baseline = read(released);
  if (baseline === undefined) {
    console.error('schema.released.graphql is missing: it holds the SDL of the last release (`npm run schema:release`).');
    process.exit(1);
  }
  const report = checkSchemaChange(baseline, sdl);
  for (const line of report.dangerous) console.log(`note (not breaking): ${line}`);
  for (const line of report.allowed) console.log(`allowed (deprecated in the last release): ${line}`);
  if (report.refused.length > 0) {
    console.error('The schema breaks clients of the last release. Deprecate first, remove in a later release:');
    for (const line of report.refused) console.error(`  ${line}`);
    process.exit(1);
  }
  console.log('schema change policy: nothing breaks clients of the last release');
} else if (mode === 'release') {
  writeFileSync(released, sdl);
  console.log(`wrote ${released}: the baseline for the change policy`);
} else {
  console.error('usage: schema.ts print|check|policy|release');
  process.exit(2);
}
