/**
 * Health of one process, for an orchestrator's probes: `/healthz` (the process is up and
 * answering) and `/readyz` (it can do its work: the database answers, its migrations are the ones
 * this version expects, its LISTEN connections hear notifications, and it is not shutting down).
 * Reasons are short fixed phrases: probes need no key, so they say nothing of hosts, errors or
 * data.
 */
import type { DatabaseProbes, ListenMode } from '../service/ops/probes.js';

/** The reason `/readyz` gives while the process has not reached its database yet (start-up). */
export const WAITING_FOR_DATABASE = 'waiting for database';

export interface HealthOptions {
  /**
   * The database checks. Absent while the process is still starting (waiting for its database,
   * running migrations): `/readyz` then answers 503 "waiting for database" until `databaseReached`.
   */
  database?: Pick<DatabaseProbes, 'appliedMigrationVersion' | 'expectedMigrationVersion'> | undefined;
  /** The process's LISTEN connections: their mode now (undefined when not started). Default none. */
  listeners?: { name: string; mode: () => ListenMode | undefined }[];
  /** How long the database check may take before it counts as unreachable. Default 2 s. */
  timeoutMs?: number;
  /** How long an answer is reused, so probes (which need no key) cannot load the database. Default 1 s. */
  cacheMs?: number;
}

export interface Readiness {
  ready: boolean;
  /** Why not, in short fixed phrases; empty when ready. */
  reasons: string[];
}

export interface Health {
  readiness(): Promise<Readiness>;
  /** From now on the process is not ready: it is shutting down (called first, before draining). */
  markStopping(): void;
  /** Start-up reached the database: from now on `/readyz` checks it (and these LISTEN connections). */
  databaseReached(database: NonNullable<HealthOptions['database']>, listeners?: HealthOptions['listeners']): void;
  readonly stopping: boolean;
}

export function createHealth(options: HealthOptions): Health {
  const timeoutMs = options.timeoutMs ?? 2_000;
  const cacheMs = options.cacheMs ?? 1_000;
  let database = options.database;
  let listeners = options.listeners ?? [];
  let stopping = false;
  let cached: { at: number; answer: Promise<string[]> } | undefined;

  async function databaseReasons(probes: NonNullable<HealthOptions['database']>): Promise<string[]> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), timeoutMs)));
    try {
      const applied = probes.appliedMigrationVersion();
      applied.catch(() => {}); // a late failure after the timeout
      const version = await Promise.race([applied, timeout]);
      if (version === 'timeout') return ['database not answering'];
      const want = await probes.expectedMigrationVersion();
      if (version < want) return ['migrations pending'];
      if (version > want) return ['database migrated by a newer version'];
      return [];
    } catch {
      return ['database unreachable'];
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    async readiness() {
      if (stopping) return { ready: false, reasons: ['shutting down'] };
      const probes = database;
      if (!probes) return { ready: false, reasons: [WAITING_FOR_DATABASE] };
      const now = Date.now();
      if (!cached || now - cached.at >= cacheMs) cached = { at: now, answer: databaseReasons(probes) };
      const reasons = [...(await cached.answer)];
      for (const l of listeners) if (l.mode() !== 'notify') reasons.push(`${l.name} not listening`);
      if (stopping) reasons.unshift('shutting down');
      return { ready: reasons.length === 0, reasons };
    },
    markStopping() {
      stopping = true;
    },
    databaseReached(probes, more) {
      database = probes;
      if (more) listeners = more;
    },
    get stopping() {
      return stopping;
    },
  };
}
