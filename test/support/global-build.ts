/**
 * Once per run of the process group: the child processes it starts run the build, not TypeScript.
 *
 * - `dist/` is rebuilt first when a source is newer than it (scripts/build-if-stale.mjs, what
 *   `npm start` runs), so a developer who edited src/ gets children running the edit: `npm test`
 *   (or one process test file) builds before the first child starts. Only under `vitest --watch`,
 *   which runs this once, does an edit need `npm run build` (or a restart of the watcher).
 * - The CLI is started as installed: `node bin/jobgate.mjs`, which runs `dist/cli/main.js`.
 * - The console (`dist/console`) is rebuilt when a source of it (console/index.html, console/src)
 *   is newer than its build: the browser tests would otherwise drive the screens of the last
 *   `npm install` or `npm run console:build`. Once here, not in each browser test file, so that
 *   files running at once never build into the same folder together.
 * - The test's own child programs (test/support/*-process.ts) are transpiled here, each to one
 *   JavaScript file whose imports of src/ point at the same modules in dist/. Under tsx every
 *   child compiled its whole import graph again at each start (seconds on a loaded machine).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The folder of the transpiled child programs (see test/support/children.ts). */
    childProgramsDir: string;
  }
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SUPPORT = path.join(ROOT, 'test', 'support');
const SRC = path.join(ROOT, 'src');
const DIST = path.join(ROOT, 'dist');
/** Inside node_modules, so a child resolves its packages (pg) as the checkout does. */
const OUT = path.join(ROOT, 'node_modules', '.cache', 'jobgate-test-children');

/** `code`'s relative imports of src/ made absolute imports of dist/; any other relative import refused. */
function pointAtDist(code: string, from: string): string {
  return code.replace(
    /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.\.?\/[^'"]+)\2/g,
    (_, lead: string, quote: string, spec: string) => {
      const target = path.resolve(path.dirname(from), spec);
      if (!target.startsWith(SRC + path.sep)) {
        throw new Error(
          `${path.relative(ROOT, from)} imports ${spec}: a child program may import only src/ (which runs from dist/) and packages`,
        );
      }
      return `${lead}${quote}${pathToFileURL(path.join(DIST, path.relative(SRC, target))).href}${quote}`;
    },
  );
}

function transpileChildPrograms(): void {
  fs.mkdirSync(OUT, { recursive: true });
  for (const file of fs.readdirSync(SUPPORT).filter((f) => f.endsWith('-process.ts'))) {
    const from = path.join(SUPPORT, file);
    const { outputText } = ts.transpileModule(fs.readFileSync(from, 'utf8'), {
      fileName: from,
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    const to = path.join(OUT, file.replace(/\.ts$/, '.mjs'));
    // Written aside and renamed: another run of the suite in this checkout may be reading it.
    const aside = `${to}.${process.pid}`;
    fs.writeFileSync(
      aside,
      `// Transpiled from test/support/${file} by test/support/global-build.ts: edit that file.\n${pointAtDist(outputText, from)}`,
    );
    fs.renameSync(aside, to);
  }
}

/** The newest modification time under `dir` (files only), in ms, at least `newest`. */
function newestIn(dir: string, newest: number): number {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const at = path.join(dir, entry.name);
    newest = entry.isDirectory() ? newestIn(at, newest) : Math.max(newest, fs.statSync(at).mtimeMs);
  }
  return newest;
}

function buildConsoleIfStale(): void {
  const built = path.join(DIST, 'console', 'index.html');
  const sources = newestIn(path.join(ROOT, 'console', 'src'), fs.statSync(path.join(ROOT, 'console', 'index.html')).mtimeMs);
  if (fs.existsSync(built) && fs.statSync(built).mtimeMs >= sources) return;
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  // As `npm run console:build` runs by hand: vitest sets NODE_ENV=test, under which vite builds
  // React's development mode (StrictMode runs each effect twice), not the console users get.
  const build = spawnSync(npm, ['run', 'console:build'], { cwd: ROOT, stdio: 'inherit', env: { ...process.env, NODE_ENV: 'production' } });
  if (build.status !== 0)
    throw new Error('jobgate tests: building the console failed (npm run console:build says why); the browser tests drive it');
}

export default function setup(project: TestProject) {
  const build = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'build-if-stale.mjs')], { stdio: 'inherit' });
  if (build.status !== 0) throw new Error('jobgate tests: building dist/ failed (npm run build says why); the process tests start it');
  buildConsoleIfStale();
  transpileChildPrograms();
  project.provide('childProgramsDir', OUT);
}
