-- Alert triage: what is firing now per (rule, subject) can be acknowledged, and a rule (or one
-- subject of it) can be silenced for a while.
--
-- The (rule, subject) state the evaluator already keeps (alert_states) is what an operator
-- triages: it gets an id of its own, so the API can name it, and the acknowledgement of the
-- episode it is in. The evaluator clears the acknowledgement when the episode ends (the condition
-- resolves), so the next firing is open again (src/service/engine/alerts/states.ts).
alter table alert_states
  add column id uuid not null default gen_random_uuid(),
  add column acknowledged_at timestamptz,
  -- The key that acknowledged (null with acknowledged_at set: the embedding application, or jobgate).
  add column acknowledged_by_key_id uuid references api_keys (id),
  add constraint alert_states_acknowledged_by check (acknowledged_by_key_id is null or acknowledged_at is not null);
create unique index alert_states_id on alert_states (id);
-- The firing states of a workspace, which is what the triage list and the overview read.
create index alert_states_workspace_firing on alert_states (workspace_id) where firing;

-- A silence: while it is in force (started, not past ends_at, not ended by hand) the notifications
-- of its rule (of one subject of it, when subject_key is set) are written as usual but not
-- delivered, and say which silence held them. It expires on its own: nothing has to run at
-- ends_at, since "in force" is read against the clock each time.
create table alert_silences (
  id                uuid primary key default gen_random_uuid(),
  workspace_id      uuid not null references workspaces (id),
  rule_id           uuid not null,
  -- Null: every subject of the rule. Otherwise a subject key as alert_states has it ('job:<id>', 'interval:<name>', ...).
  subject_key       text,
  subject_type      text check (subject_type in ('JOB', 'RECOVERABLE', 'INTERVAL')),
  subject_id        uuid,
  subject_name      text,
  starts_at         timestamptz not null default now(),
  ends_at           timestamptz not null,
  -- Set when an operator lifted it before ends_at.
  ended_at          timestamptz,
  ended_by_key_id   uuid references api_keys (id),
  comment           text check (length(comment) <= 500),
  created_by_key_id uuid references api_keys (id),
  created_at        timestamptz not null default now(),
  unique (workspace_id, id),
  foreign key (workspace_id, rule_id) references alert_rules (workspace_id, id),
  check (ends_at > starts_at),
  check ((subject_key is null) = (subject_type is null))
);
create index alert_silences_workspace_created on alert_silences (workspace_id, created_at desc, id desc);
-- What the evaluator asks when it writes a notification: the silences of this rule not yet lifted.
create index alert_silences_rule_live on alert_silences (rule_id, ends_at) where ended_at is null;

-- The silence a notification was written under (then it was not delivered).
alter table alert_notifications add column silence_id uuid,
  add constraint alert_notifications_silence foreign key (workspace_id, silence_id) references alert_silences (workspace_id, id);
