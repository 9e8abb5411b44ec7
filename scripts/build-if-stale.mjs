#!/usr/bin/env node
/**
 * `npm start` runs the compiled CLI, as an installed jobgate does (the command after this script's
 * name, run in this process once dist/ is fresh). `npm install` builds `dist/`
 * (the `prepare` script); this rebuilds it first when a source changed since, so an edit in
 * `src/` is never started stale. Plain JavaScript: it must run before anything is compiled.
 */
import { spawnSync } from 'node:child_process';
import { setInterval } from 'node:timers';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stamp = path.join(root, 'dist', '.tsbuildinfo');

function newestBelow(dir) {
  let newest = fs.statSync(dir).mtimeMs; // a file removed changes its folder
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestBelow(full) : fs.statSync(full).mtimeMs);
  }
  return newest;
}

function builtAt() {
  try {
    if (!fs.existsSync(path.join(root, 'dist', 'cli', 'main.js'))) return -1;
    return fs.statSync(stamp).mtimeMs;
  } catch {
    return -1;
  }
}

const sources = Math.max(
  newestBelow(path.join(root, 'src')),
  ...['tsconfig.json', 'tsconfig.build.json', 'package.json'].map((f) => fs.statSync(path.join(root, f)).mtimeMs),
);
if (builtAt() < sources) {
  process.stderr.write('jobgate: dist/ is older than src/: building it (npm run build)\n');
  // An incremental build trusts its stamp over the files: with outputs missing, start over.
  if (!fs.existsSync(path.join(root, 'dist', 'cli', 'main.js'))) fs.rmSync(stamp, { force: true });
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const result = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
  // An incremental build that emitted nothing leaves the stamp as it was; mark it fresh.
  const now = new Date();
  fs.utimesSync(stamp, now, now);
}

// `npm start` and `npm run migrate` name the command to run once dist/ is fresh, in this process.
// npm runs it under a shell, and a SIGTERM to npm (a supervisor's, `timeout npm start`) ends npm
// and that shell but never reached jobgate, which went on holding its port and its embedded
// Postgres. So once the shell is gone (this process handed to another parent) jobgate is sent the
// same SIGTERM and shuts down as it would on its own. Ctrl-C reaches the whole group anyway. Only
// under npm (npm_lifecycle_event): a process started otherwise may be meant to outlive its parent.
if (process.argv.length > 2) {
  const parent = process.ppid;
  if (process.env.npm_lifecycle_event)
    setInterval(() => {
      if (process.ppid !== parent) process.kill(process.pid, 'SIGTERM');
    }, 500).unref();
  await import('../bin/jobgate.mjs');
}
