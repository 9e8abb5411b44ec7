/**
 * CPU time of processes on this host, from /proc (Linux): how the engine benchmark splits the
 * cost of an execution between the database server and the worker processes.
 *
 * The database's share is read from the server processes (backends) serving the benchmark's own
 * database, so it is only known when that server runs on this host (the local server or the
 * embedded one, not BENCH_DATABASE_URL). It leaves out the server's shared background work (WAL
 * writer, checkpointer, autovacuum), which both systems under test cause in their own measure.
 */
import fs from 'node:fs';
import type pg from 'pg';

// /proc reports CPU times in clock ticks of USER_HZ, which Linux fixes at 100 per second for
// user space on every architecture it supports.
const TICKS_PER_SECOND = 100;

/** User plus system CPU seconds used so far by `pid`, or undefined if it cannot be read. */
function cpuSecondsOf(pid: number): number | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is parenthesised and may hold spaces: count fields after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the line, so 12th and 13th after the name.
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

/** Sum of CPU seconds of `pids`, or undefined if any of them cannot be read. */
export function cpuSeconds(pids: number[]): number | undefined {
  let total = 0;
  for (const pid of pids) {
    const s = cpuSecondsOf(pid);
    if (s === undefined) return undefined;
    total += s;
  }
  return total;
}

/**
 * The backends serving `database`, except the asking connection's own; empty when the server is
 * not on this host (its process ids mean nothing here).
 */
export async function backendPids(client: pg.Client, database: string, local: boolean): Promise<number[]> {
  if (!local) return [];
  const { rows } = await client.query<{ pid: number }>(
    `select pid from pg_stat_activity where datname = $1 and backend_type = 'client backend' and pid <> pg_backend_pid()`,
    [database],
  );
  return rows.map((r) => r.pid);
}

/** CPU spent per execution, in microseconds, by the database's backends and by the workers. */
export interface CpuSplit {
  postgres: number;
  workers: number;
}

/**
 * Starts measuring the CPU of `backends` and `workers`; `stop(executions)` gives each group's
 * CPU per execution since the start, or undefined where a process could not be read.
 */
export function measureCpu(backends: number[], workers: number[]) {
  const at = { backends: cpuSeconds(backends), workers: cpuSeconds(workers) };
  return {
    stop(executions: number): CpuSplit | undefined {
      const backendsNow = cpuSeconds(backends);
      const workersNow = cpuSeconds(workers);
      if (
        backends.length === 0 ||
        at.backends === undefined ||
        at.workers === undefined ||
        backendsNow === undefined ||
        workersNow === undefined
      ) {
        return undefined;
      }
      const perExecution = (seconds: number) => (seconds / executions) * 1e6;
      return { postgres: perExecution(backendsNow - at.backends), workers: perExecution(workersNow - at.workers) };
    },
  };
}
