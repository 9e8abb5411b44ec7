/**
 * Reading a run's findings: in the order recorded (by id, on the `findings_run` index on
 * (run_id, id)), counted by kind and severity, and by id.
 */
import { sql, type RawBuilder } from 'kysely';
import type { FindingRecord } from '../types.js';
import { countPerParent, firstPerParent, ID_ORDER } from './listing.js';
import type { Executor } from './scope.js';

/** A findings row, as `select *` reads it. */
export type FindingRow = FindingRecord;

export interface FindingListFilter {
  kind?: string | null | undefined;
  severity?: FindingRow['severity'] | null | undefined;
}

// `runId` is a run's id, or a reference to one (a page of runs, each with its findings).
const where = (workspaceId: string, runId: string | RawBuilder<string>, f: FindingListFilter) => sql<boolean>`
  workspace_id = ${workspaceId} and run_id = ${runId}
  and (${f.kind ?? null}::text is null or kind = ${f.kind ?? null})
  and (${f.severity ?? null}::text is null or severity = ${f.severity ?? null})`;

/** The run's findings above id `afterId`, oldest first, at most `limit`. */
export async function findingPage(
  ex: Executor,
  workspaceId: string,
  runId: string,
  f: FindingListFilter,
  opts: { limit: number; afterId: bigint },
): Promise<FindingRow[]> {
  const { rows } = await sql<FindingRow>`
    select * from findings where ${where(workspaceId, runId, f)} and id > ${opts.afterId.toString()}
    order by id limit ${opts.limit}`.execute(ex);
  return rows;
}

/** How many of the run's findings match, counting at most `limit`. */
export async function countFindings(
  ex: Executor,
  workspaceId: string,
  runId: string,
  f: FindingListFilter,
  limit: number,
): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from (select 1 from findings where ${where(workspaceId, runId, f)} limit ${limit}) m`.execute(ex);
  return rows[0]!.n;
}

/** The findings of each of `runIds` counted per kind and severity, by run id (a run with none is left out). */
export async function findingCountsOf(ex: Executor, workspaceId: string, runIds: readonly string[]) {
  const { rows } = await sql<{ run_id: string; kind: string; severity: FindingRow['severity']; count: number }>`
    select run_id, kind, severity, count(*)::int as count from findings
    where workspace_id = ${workspaceId} and run_id = any(${runIds}::uuid[])
    group by run_id, kind, severity order by run_id, kind, severity`.execute(ex);
  const byRun = new Map<string, { kind: string; severity: FindingRow['severity']; count: number }[]>();
  for (const { run_id, ...count } of rows) {
    const list = byRun.get(run_id);
    if (list) list.push(count);
    else byRun.set(run_id, [count]);
  }
  return byRun;
}

/** The workspace's finding with this id, if any. */
export async function findFinding(ex: Executor, workspaceId: string, id: bigint): Promise<FindingRow | undefined> {
  const { rows } = await sql<FindingRow>`select * from findings where workspace_id = ${workspaceId} and id = ${id.toString()}`.execute(ex);
  return rows[0];
}

/**
 * The first `limit` findings of each of `runIds` that `f` matches, oldest first, as findingPage
 * reads one run's first page, for a page of runs that each show their findings
 * (Run.findingConnection): one probe of (run_id, id) per run, in one statement. Runs of another
 * workspace, or ids of none, have none.
 */
export async function firstFindingsOf(
  ex: Executor,
  workspaceId: string,
  runIds: readonly string[],
  f: FindingListFilter,
  limit: number,
): Promise<FindingRow[]> {
  return firstPerParent(
    ex,
    'runs',
    runIds,
    workspaceId,
    'findings',
    (run) =>
      ex
        .selectFrom('findings')
        .selectAll('findings')
        .where(where(workspaceId, run, f)),
    ID_ORDER,
    limit,
  );
}

/** How many findings of each of `runIds` match `f`, counting at most `limit` each (0 for none); ids of no run of the workspace are left out. */
export async function countFindingsOf(
  ex: Executor,
  workspaceId: string,
  runIds: readonly string[],
  f: FindingListFilter,
  limit: number,
): Promise<Map<string, number>> {
  return countPerParent(ex, 'runs', runIds, workspaceId, (run) => ex.selectFrom('findings').where(where(workspaceId, run, f)), limit);
}
