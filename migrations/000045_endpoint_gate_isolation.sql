-- Changing an endpoint's limits sets the gated flag of its pending executions (000044) in a
-- statement that must see every one of them: under READ COMMITTED it does (a statement's snapshot
-- is taken after the row lock it waited for). Under REPEATABLE READ or SERIALIZABLE (a library
-- caller's own transaction) its snapshot is the transaction's first, and an execution made
-- PENDING by a transaction that committed since would keep the flag of the old limits, and wait
-- on the wrong claim path until the limits change again. Refused instead, saying why.
create or replace function jobgate_endpoint_gate() returns trigger language plpgsql as $$
begin
  if current_setting('transaction_isolation') <> 'read committed' then
    raise exception 'jobgate: an endpoint''s limits can be set or cleared only in a READ COMMITTED transaction (this one is %)',
      upper(current_setting('transaction_isolation'))
      using errcode = '0A000';
  end if;
  -- In id order, as every statement that locks several executions (see lease.ts).
  update executions e set gated = jobgate_endpoint_limited(new)
  from (select x.id from executions x
        where x.endpoint_id = new.id and x.status = 'PENDING' and x.gated <> jobgate_endpoint_limited(new)
        order by x.id for no key update) l
  where e.id = l.id and e.status = 'PENDING';
  return null;
end $$;
