/**
 * Landed migrations are frozen: migrations/checksums.json holds each one's sha256, and this
 * fails when one changed, disappeared, or when a new one was not frozen (`npm run
 * migrations:freeze` adds it and refreshes schema.sql).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MIGRATIONS_DIR, readMigrations } from '../../src/db/migrate.js';
import { compare, explain, freezeManifest, readManifest } from '../../scripts/migrations.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-frozen-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('frozen migrations', () => {
  it('every migration in migrations/ is in the manifest, with the checksum it landed with', async () => {
    const problems = explain(compare(readManifest(), await readMigrations()));
    expect(problems, problems.join('\n')).toEqual([]);
    expect(Object.keys(readManifest()).length).toBeGreaterThanOrEqual(20);
  });

  it('a landed migration that changed or is gone, or a new one not frozen, is caught and says what to do', async () => {
    const dir = path.join(tmp, 'changed');
    fs.cpSync(MIGRATIONS_DIR, dir, { recursive: true });
    const names = (await readMigrations(dir)).map((m) => m.name);
    fs.appendFileSync(path.join(dir, names[2]!), '\n-- one more line\n');
    fs.rmSync(path.join(dir, names[5]!));
    fs.writeFileSync(path.join(dir, '999999_later.sql'), 'select 1;\n');

    const problems = compare(readManifest(), await readMigrations(dir));
    expect(problems).toEqual({ changed: [names[2]], missing: [names[5]], unfrozen: ['999999_later.sql'] });
    const text = explain(problems).join('\n');
    expect(text).toContain(`migration ${names[2]} changed after it landed`);
    expect(text).toContain(`migration ${names[5]} landed and is gone`);
    expect(text).toContain('npm run migrations:freeze');
  });

  it('freezing adds new migrations and refuses to take in a changed landed one', async () => {
    const dir = path.join(tmp, 'freeze');
    fs.cpSync(MIGRATIONS_DIR, dir, { recursive: true });
    const manifest = path.join(tmp, 'checksums.json');
    fs.copyFileSync(path.join(MIGRATIONS_DIR, 'checksums.json'), manifest);

    fs.writeFileSync(path.join(dir, '999999_later.sql'), 'select 1;\n');
    expect(await freezeManifest(manifest, dir)).toEqual(['999999_later.sql']);
    expect(Object.keys(readManifest(manifest)).at(-1)).toBe('999999_later.sql');

    const before = fs.readFileSync(manifest, 'utf8');
    const first = (await readMigrations(dir))[0]!.name;
    fs.appendFileSync(path.join(dir, first), '\n-- edited\n');
    await expect(freezeManifest(manifest, dir)).rejects.toThrow(`migration ${first} changed after it landed`);
    expect(fs.readFileSync(manifest, 'utf8')).toBe(before);
  });
});
