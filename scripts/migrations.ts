/**
 * Migrations are frozen once they land: `migrations/checksums.json` holds the sha256 of every
 * landed file (the checksum the runner records in `jobgate_migrations`), and a check fails when
 * one of them changed or disappeared, or when a new file was not frozen yet.
 *
 *   check    compare migrations/ with the manifest (no database; part of `npm run check`)
 *   freeze   add new migration files to the manifest (it refuses to change a landed one), then
 *            rewrite the schema dump `schema.sql` (needs a database: see schema-dump.ts)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { readMigrations, type MigrationFile } from '../src/db/migrate.js';

export const MANIFEST = fileURLToPath(new URL('../migrations/checksums.json', import.meta.url));

/** `{ "000001_foundation.sql": "<sha256 hex>", ... }`, in file order. */
export type Manifest = Record<string, string>;

export function readManifest(file = MANIFEST): Manifest {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Manifest;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw error;
  }
}

export interface ManifestProblems {
  /** Landed files whose text changed since they were frozen. */
  changed: string[];
  /** Landed files that are gone. */
  missing: string[];
  /** Files in migrations/ not frozen yet. */
  unfrozen: string[];
}

export function compare(manifest: Manifest, files: MigrationFile[]): ManifestProblems {
  const byName = new Map(files.map((f) => [f.name, f]));
  const changed: string[] = [];
  const missing: string[] = [];
  for (const [name, checksum] of Object.entries(manifest)) {
    const file = byName.get(name);
    if (!file) missing.push(name);
    else if (file.checksum !== checksum) changed.push(name);
  }
  const unfrozen = files.filter((f) => !(f.name in manifest)).map((f) => f.name);
  return { changed, missing, unfrozen };
}

/** The problems as sentences saying what to do; empty when migrations/ matches the manifest. */
export function explain({ changed, missing, unfrozen }: ManifestProblems): string[] {
  const out: string[] = [];
  for (const name of changed) {
    out.push(
      `migration ${name} changed after it landed: migrations are frozen (a database that applied the old text ` +
        'refuses to start). Restore the file (git checkout -- migrations/' +
        name +
        ') and put the change in a new migration.',
    );
  }
  for (const name of missing) {
    out.push(`migration ${name} landed and is gone: restore it (databases have applied it); undo a migration with a new one.`);
  }
  for (const name of unfrozen) {
    out.push(
      `migration ${name} is new: run \`npm run migrations:freeze\` to add it to migrations/checksums.json and refresh schema.sql, and commit both.`,
    );
  }
  return out;
}

/** Adds the new files to the manifest; throws (writing nothing) when a landed one changed or is gone. */
export async function freezeManifest(file = MANIFEST, dir?: string): Promise<string[]> {
  const files = await readMigrations(dir);
  const manifest = readManifest(file);
  const problems = compare(manifest, files);
  const refusals = explain({ ...problems, unfrozen: [] });
  if (refusals.length) throw new Error(refusals.join('\n'));
  const next: Manifest = {};
  for (const f of files) next[f.name] = manifest[f.name] ?? f.checksum;
  writeFileSync(file, JSON.stringify(next, null, 2) + '\n');
  return problems.unfrozen;
}

async function main(command: string | undefined): Promise<number> {
  if (command === 'check') {
    const problems = explain(compare(readManifest(), await readMigrations()));
    if (problems.length) {
      for (const p of problems) console.error(p);
      return 1;
    }
    console.log('migrations: every landed migration is as it was frozen');
    return 0;
  }
  if (command === 'freeze') {
    const added = await freezeManifest();
    console.log(added.length ? `migrations: froze ${added.join(', ')}` : 'migrations: nothing new to freeze');
    const { refreshSchemaDump } = await import('./schema-dump.js');
    await refreshSchemaDump();
    return 0;
  }
  console.error('usage: tsx scripts/migrations.ts check|freeze');
  return 2;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv[2]).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
