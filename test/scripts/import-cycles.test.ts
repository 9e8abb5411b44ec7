/**
 * The import-cycle check (scripts/import-cycles.ts) on small trees written for the purpose: every
 * kind of import counts, packages and files outside the tree do not, and each cycle is reported
 * once as a loop through its files.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findCycles, importGraph } from '../../scripts/import-cycles.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A tree of `files` (path → text) under a fresh folder; returns the folder's src/. */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'jobgate-cycles-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  return path.join(dir, 'src');
}

const loops = (src: string) => findCycles(importGraph(src)).map((loop) => loop.map((f) => path.relative(src, f)));

describe('import cycles', () => {
  it('finds none in a tree whose imports all point one way, packages and outside files included', () => {
    const src = tree({
      'src/a.ts': `import pg from 'pg';\nimport { b } from './b.js';\nimport '../outside.js';\nexport const a = b;`,
      'src/b.ts': `import type { C } from './lib/c.js';\nexport const b = 1 as unknown as C;`,
      'src/lib/c.ts': `export type C = number;`,
      'outside.ts': `import '../src/a.js';`,
    });
    expect(loops(src)).toEqual([]);
  });

  it('finds a cycle of type-only imports, and one through a re-export and a dynamic import, each once', () => {
    const src = tree({
      'src/worker.ts': `import type { Runner } from './runner.js';\nexport interface Worker { r: Runner }`,
      'src/runner.ts': `import type { Worker } from './worker.js';\nexport interface Runner { w: Worker }`,
      'src/x.ts': `export { y } from './y.js';\nexport const x = 1;`,
      'src/y.ts': `export const y = 2;\nexport const load = () => import('./z.js');`,
      'src/z.ts': `import { x } from './x.js';\nexport const z = x;`,
    });
    expect(loops(src)).toEqual(
      expect.arrayContaining([
        ['runner.ts', 'worker.ts', 'runner.ts'],
        ['x.ts', 'y.ts', 'z.ts', 'x.ts'],
      ]),
    );
    expect(loops(src)).toHaveLength(2);
  });

  it('finds a file that imports itself', () => {
    expect(loops(tree({ 'src/self.ts': `import type { T } from './self.js';\nexport type T = number | T[];` }))).toEqual([
      ['self.ts', 'self.ts'],
    ]);
  });
});
