-- Access: API keys, the audit log, and who created what.

create table api_keys (
  id            uuid primary key default gen_random_uuid(),
  workspace_id  uuid not null references workspaces (id),
  name          text not null check (length(name) between 1 and 200),
  role          text not null check (role in ('ADMIN', 'OPERATOR', 'VIEWER')),
  -- May create workspaces (the installation's own administrators).
  installation_admin boolean not null default false,
  -- The first characters of the key, shown to tell keys apart; never enough to use it.
  prefix        text not null,
  -- sha256 of the whole key. The key itself is shown once, at creation, and never stored.
  key_hash      bytea not null unique,
  created_by_key_id uuid references api_keys (id),
  created_at    timestamptz not null default now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz,
  unique (workspace_id, id)
);

create table audit_log (
  id            bigint generated always as identity primary key,
  workspace_id  uuid not null references workspaces (id),
  actor_kind    text not null check (actor_kind in ('user', 'library', 'system')),
  actor_key_id  uuid references api_keys (id),
  action        text not null,
  target_type   text,
  target_id     text,
  -- The input with every secret replaced by "[redacted]".
  input         jsonb not null default '{}'::jsonb,
  -- OK, or the error code the action was refused with.
  result_code   text not null,
  created_at    timestamptz not null default now()
);
create index audit_log_workspace on audit_log (workspace_id, id desc);

alter table jobs add column created_by_key_id uuid references api_keys (id);
alter table endpoints add column created_by_key_id uuid references api_keys (id);
alter table executions add column created_by_key_id uuid references api_keys (id);
