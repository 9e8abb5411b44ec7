-- Subscription tickets: a browser's EventSource cannot send an Authorization header, so a page
-- mints a ticket (createSubscriptionTicket, with its key) and opens the SSE stream with
-- ?ticket=... instead. A ticket is single-use, short-lived and bound to the key that minted it,
-- its workspace and its role; only its sha256 is stored, as for keys.
create table subscription_tickets (
  id            uuid primary key default gen_random_uuid(),
  workspace_id  uuid not null references workspaces (id),
  api_key_id    uuid not null references api_keys (id),
  role          text not null check (role in ('ADMIN', 'OPERATOR', 'VIEWER')),
  ticket_hash   bytea not null unique,
  created_at    timestamptz not null default now(),
  expires_at    timestamptz not null,
  used_at       timestamptz
);
-- Pruning of expired tickets reads them by expiry.
create index subscription_tickets_expires on subscription_tickets (expires_at);
