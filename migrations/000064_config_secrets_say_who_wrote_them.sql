-- A config's secret entries say which key wrote them (`setBy`, src/service/endpoints/config-secrets.ts):
-- only that key, or an ADMIN, may aim an endpoint at a secret or name it in a job's input. setConfig
-- replaces every entry, so the key of a config's latest accepted config.set wrote every secret the
-- config holds now (null: a caller without a key). A config whose audit rows are gone (pruned by
-- retention) is left as it is: its secrets count as its creator's, as before this migration.
with last_set as (
  select distinct on (a.target_id) a.target_id, a.actor_key_id
  from audit_log a
  where a.action = 'config.set' and a.result_code = 'OK' and a.target_type = 'Config' and a.target_id is not null
  order by a.target_id, a.id desc
)
update configs c
set entries = (
  select jsonb_object_agg(e.key,
           case when (e.value ->> 'secret')::boolean then e.value || jsonb_build_object('setBy', l.actor_key_id) else e.value end)
  from jsonb_each(c.entries) e
)
from last_set l
where l.target_id = c.id::text
  and exists (select 1 from jsonb_each(c.entries) e where (e.value ->> 'secret')::boolean);
