-- Who created each payload spec and config: OPERATOR keys may change only their own, and only a
-- config's creator (or an ADMIN) may point an endpoint at a config that holds secrets.
alter table payload_specs add column created_by_key_id uuid references api_keys (id);
alter table configs add column created_by_key_id uuid references api_keys (id);
