/**
 * What a connection string's kind allows. A transaction-mode pooler (PgBouncer with
 * pool_mode=transaction) gives each transaction whichever server connection is free, so nothing
 * of a session outlives its transaction: not a named statement (unless the pooler tracks them),
 * not LISTEN. One place decides, so the pool, the workers and the hub cannot read it differently.
 */
export interface ConnectionKind {
  /** Postgres itself, or a pooler in front of it. */
  connectionString: string;
  /** `transaction` when the connection string is a transaction-mode pooler. */
  pooler?: 'transaction' | undefined;
  /** Where LISTEN connects, when given. */
  listenConnectionString?: string | undefined;
  /** Named statements, when said. */
  preparedStatements?: boolean | undefined;
}

/** Where LISTEN connects (null: nowhere, poll) and whether statements are prepared by name. */
export function sessions(kind: ConnectionKind): { listen: string | null; preparedStatements: boolean; startupOptions: boolean } {
  const pooled = kind.pooler === 'transaction';
  return {
    listen: kind.listenConnectionString ?? (pooled ? null : kind.connectionString),
    preparedStatements: kind.preparedStatements ?? !pooled,
    // PgBouncer refuses a startup parameter it was not told to ignore (`options` among them),
    // and ends the connection: nothing is sent at connect through a pooler.
    startupOptions: !pooled,
  };
}
