/**
 * What a test of `jobgate` processes on the embedded default looks at from outside: whether a
 * process runs, the pid in a cluster's postmaster.pid, and which processes serve a folder.
 */
import fs from 'node:fs';
import path from 'node:path';

/** Whether `pid` is a running process (a zombie, which answers signal 0, is not). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return true;
  }
}

/** The pid the cluster in `dataDir/pg` recorded in its postmaster.pid, if any. */
export function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number.parseInt(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]!, 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Pids of live processes whose command line mentions `needle`. */
export function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(needle) && isAlive(Number(entry))) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
