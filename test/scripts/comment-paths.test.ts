/**
 * Comments name files that exist (scripts/comment-paths.ts, part of `npm run check`): the check
 * passes on the tree, and fails on a made-up tree whose comments point at files that moved.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { referencesIn, staleReferences } from '../../scripts/comment-paths.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-comment-paths-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function tree(files: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(tmp, 'tree-'));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  }
  return root;
}

describe('comment paths', () => {
  it('every file a comment of src, test, bench or scripts names exists', () => {
    const stale = staleReferences();
    expect(stale.map((s) => `${s.file}:${s.line}: ${s.reference}`)).toEqual([]);
  });

  it('finds a comment naming a file that does not exist, in every form a comment writes a path', () => {
    const root = tree({
      'README.md': '# x\n',
      'src/db/pool.ts': 'export const pool = 1;\n',
      'src/service/jobs/create.ts': 'export const create = 1;\n',
      'src/service/jobs/guards.ts': [
        '/**',
        ' * Guards (./create.ts, ../../db/pool.ts, src/db/pool.ts, db/pool.ts, create.ts, README.md, src/db).',
        ' * Stale: src/service/job-guards.ts, ./job-create.ts, ../../db/repos/jobs.ts, run-store.ts, src/db/repos.',
        ' */',
        "import { create } from './create.js'; // create.js is create.ts, as imports write it",
        'export const guards = {',
        '  create,',
        '  // a comment before a closing brace: src/service/engine/outbound.ts',
        '};',
        "export const text = '// not a comment: src/nowhere.ts';",
        '',
      ].join('\n'),
    });
    const stale = staleReferences(root, ['src']);
    expect(stale).toEqual([
      { file: 'src/service/jobs/guards.ts', line: 3, reference: 'src/service/job-guards.ts' },
      { file: 'src/service/jobs/guards.ts', line: 3, reference: './job-create.ts' },
      { file: 'src/service/jobs/guards.ts', line: 3, reference: '../../db/repos/jobs.ts' },
      { file: 'src/service/jobs/guards.ts', line: 3, reference: 'run-store.ts' },
      { file: 'src/service/jobs/guards.ts', line: 3, reference: 'src/db/repos' },
      { file: 'src/service/jobs/guards.ts', line: 8, reference: 'src/service/engine/outbound.ts' },
    ]);
  });

  it('leaves out URLs, references to other projects, built and installed files', () => {
    expect(
      referencesIn(
        '// https://www.w3.org/TR/trace-context/index.md, graphile/worker:src/lib.ts, dist/cli/main.js, node_modules/pg/lib/index.js, @scope/pkg/x.js',
      ),
    ).toEqual([]);
    expect(referencesIn('// see src/db/pool.ts.')).toEqual(['src/db/pool.ts']);
  });
});
