/**
 * Advisory locks (src/db/advisory-locks.ts): each use has keys of its own, and no other file picks
 * one by number, where a reader could not see that two uses share it (two did once: creates taking
 * turns on a lock key, and a capped workspace's claims).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOCK_CLASS, LOCK_KEY } from '../../src/db/advisory-locks.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );
}

describe('advisory locks', () => {
  it('give every use a class (two-key) or a key (one-key) of its own', () => {
    const classes = Object.values(LOCK_CLASS);
    const keys = Object.values(LOCK_KEY);
    expect(new Set(classes).size).toBe(classes.length);
    expect(new Set(keys).size).toBe(keys.length);
    // A class is the first int4 key.
    for (const c of classes) expect(Number.isInteger(c) && c > 0 && c < 2 ** 31).toBe(true);
  });

  it('are taken by name from the registry everywhere else in src/', () => {
    const numbers = [...Object.values(LOCK_CLASS), ...Object.values(LOCK_KEY)]
      .filter((n) => n !== LOCK_CLASS.eventWriters) // 000009's SQL, read from pg_locks by number
      .map((n) => new RegExp(`\\b${String(n).replace(/\B(?=(\d{3})+$)/g, '_?')}\\b`));
    const offenders = sources(path.join(ROOT, 'src'))
      .filter((f) => !f.endsWith(path.join('db', 'advisory-locks.ts')))
      .filter((f) => numbers.some((re) => re.test(readFileSync(f, 'utf8'))))
      .map((f) => path.relative(ROOT, f));
    expect(offenders).toEqual([]);
  });
});
