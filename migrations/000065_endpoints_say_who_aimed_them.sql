-- Who last chose where an endpoint sends: the key that registered it, then whichever key changed
-- its url, headers or config since (null: a caller without a key). A config's secret is rendered
-- into the endpoint's requests only when that key wrote the secret, or is an ADMIN's
-- (src/service/endpoints/config-secrets.ts). Until now the endpoint's creator stood for it.
alter table endpoints add column aimed_by_key_id uuid references api_keys (id);
update endpoints set aimed_by_key_id = created_by_key_id;
comment on column endpoints.aimed_by_key_id is 'The key that last chose where the endpoint sends (registered it, or changed its url, headers or config); null: a caller without a key. Its config''s secrets are rendered into its requests only when this key wrote them, or is an ADMIN''s.';
