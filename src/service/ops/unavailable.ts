/**
 * Whether an error means the database could not be reached (a restart, a cut connection, every
 * pooled connection held): for adapters, which answer such errors UNAVAILABLE (retry later)
 * instead of masking them as bugs. The SQLSTATE and network codes it reads live in src/db.
 */
export { isConnectionError } from '../../db/unavailable.js';
