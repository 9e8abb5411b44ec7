import { sql } from 'kysely';
import { isUuid, scoped, type Executor } from './scope.js';

export type NodeTable = 'jobs' | 'executions' | 'endpoints' | 'payload_specs' | 'configs' | 'runs' | 'api_keys' | 'batches';

/** Which of the workspace's tables holds `id` (each a primary-key probe), if any. */
export async function tableHolding(db: Executor, workspaceId: string, id: string): Promise<NodeTable | undefined> {
  if (!isUuid(id)) return undefined;
  const ws = scoped(workspaceId);
  const { rows } = await sql<{ t: NodeTable }>`
    select 'jobs' as t from jobs where id = ${id} and workspace_id = ${ws}
    union all select 'executions' from executions where id = ${id} and workspace_id = ${ws}
    union all select 'endpoints' from endpoints where id = ${id} and workspace_id = ${ws}
    union all select 'payload_specs' from payload_specs where id = ${id} and workspace_id = ${ws}
    union all select 'configs' from configs where id = ${id} and workspace_id = ${ws}
    union all select 'runs' from runs where id = ${id} and workspace_id = ${ws}
    union all select 'api_keys' from api_keys where id = ${id} and workspace_id = ${ws}
    union all select 'batches' from batches where id = ${id} and workspace_id = ${ws}
    limit 1`.execute(db);
  return rows[0]?.t;
}
