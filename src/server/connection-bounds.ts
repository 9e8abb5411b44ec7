/**
 * Bounds on the gateway's TCP connections, before anything is read from them: a client that
 * opens connections and sends half a request holds a file descriptor each for as long as the
 * server waits for the rest. From one address, 20,000 such connections took every descriptor the
 * process had, and every other client (health checks and valid keys alike) got an empty reply
 * until they closed (found by an outside attack test).
 *
 * - Open connections per client address (`connectionsPerAddress`; an IPv6 address by its /64, as
 *   src/service/access/load-bounds.ts counts failed authentications): past it, a new connection is closed at once.
 *   A declared reverse proxy (JOBGATE_TRUSTED_PROXIES) carries many clients and is not bounded.
 * - The request's head must arrive within HEADERS_TIMEOUT_MS (Node's default is a minute).
 * - The server's connections stop below the process's descriptor limit (Linux: its soft
 *   RLIMIT_NOFILE), so that its own sockets (the database pools, LISTEN) and files still open.
 *
 * The start-up server that answers probes while the process waits for its database is bounded the
 * same way (ops-routes.ts), and the gateway takes it over with its counts.
 */
import fs from 'node:fs';
import type { Server } from 'node:http';
import type net from 'node:net';
import { addressGroup } from '../service/access/load-bounds.js';
import { atMostEvery, type Logger } from '../log.js';

/** Long enough for a slow client on a bad network, far short of Node's minute. */
export const HEADERS_TIMEOUT_MS = 20_000;

/**
 * Descriptors kept for the process's own use when the server's connections are bounded by its
 * limit: its database pools and LISTEN connections, a worker's outbound requests in the same
 * process, files. An eighth of the limit, and at least 256.
 */
const descriptorsKept = (limit: number) => Math.max(256, Math.floor(limit / 8));

/** How often Node looks for requests past their head's timeout (its default, 30 s, would let one wait 50 s). */
export const CONNECTIONS_CHECKING_INTERVAL_MS = 5_000;

export interface ConnectionBounds {
  connectionsPerAddress: number;
  isTrustedProxy: (address: string) => boolean;
  log: Logger;
}

/** Servers already bounded: the start-up server is bounded first, then handed to the gateway with its counts. */
const bounded = new WeakSet<Server>();

/**
 * Bounds `server`'s connections, once per server. Create it with `connectionsCheckingInterval:
 * CONNECTIONS_CHECKING_INTERVAL_MS`, so the head's timeout is kept to within a few seconds.
 */
export function boundConnections(server: Server, options: ConnectionBounds): void {
  if (bounded.has(server)) return;
  bounded.add(server);
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  const limit = descriptorLimit();
  if (limit !== undefined && limit > 2 * descriptorsKept(limit)) server.maxConnections = limit - descriptorsKept(limit);
  const max = options.connectionsPerAddress;
  if (max <= 0) return;
  const open = new Map<string, number>();
  const refusedNote = atMostEvery(10_000, (msg) => options.log.warn(msg));
  server.on('connection', (socket: net.Socket) => {
    const peer = socket.remoteAddress;
    if (peer === undefined || options.isTrustedProxy(peer)) return;
    const group = addressGroup(peer);
    const count = (open.get(group) ?? 0) + 1;
    if (count > max) {
      socket.destroy();
      refusedNote(
        `gateway: closed a connection from ${group}: it holds ${max} already (JOBGATE_MAX_CONNECTIONS_PER_ADDRESS; ` +
          'a reverse proxy in front belongs in JOBGATE_TRUSTED_PROXIES, or all its clients count as its one address)',
      );
      return;
    }
    open.set(group, count);
    socket.once('close', () => {
      const left = (open.get(group) ?? 1) - 1;
      if (left > 0) open.set(group, left);
      else open.delete(group);
    });
  });
}

/** The process's soft limit on open files, where the system says (Linux); undefined elsewhere or when unlimited. */
function descriptorLimit(): number | undefined {
  try {
    const line = fs
      .readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.split(/\s{2,}/)[1];
    return soft && /^\d+$/.test(soft) ? Number(soft) : undefined;
  } catch {
    return undefined;
  }
}
