/**
 * A TCP proxy in front of the test's Postgres, for faults a real network makes: it forwards bytes
 * both ways, and on request drops the answer to a claim the server has already committed and
 * resets every connection, as a restart or a cut link between them would. It reads just enough of
 * the wire protocol to know where the claim's answer ends (a message is a type byte and a length
 * that counts itself); it never changes a byte it forwards.
 */
import net from 'node:net';

export interface ClaimCut {
  /** Called, synchronously, at the moment the connections are reset (before the worker can learn of it). */
  onCut?: () => void;
  /** Refuse new connections after the cut (accepted, then reset at once) until `reopen()`. */
  refuse?: boolean;
}

export interface PgProxy {
  /** `url` with its host and port pointing at the proxy. */
  url: string;
  /**
   * Arms the cut: the next claim answered with rows (a Bind of a `jobgate.claim` statement, and
   * its answer up to ReadyForQuery, which the server sends after the commit) never reaches the
   * client: every connection is reset instead. Resolves when that happened.
   */
  cutNextClaim(options?: ClaimCut): Promise<void>;
  /** Lets connections through again after a cut with `refuse`. */
  reopen(): void;
  /** Connections refused since the cut. */
  refused(): number;
  close(): Promise<void>;
}

const CLAIM_STATEMENT = Buffer.from('jobgate.claim');
const READY_FOR_QUERY = 'Z'.charCodeAt(0);
const DATA_ROW = 'D'.charCodeAt(0);

interface Pair {
  client: net.Socket;
  server: net.Socket;
}

export async function startPgProxy(targetUrl: string): Promise<PgProxy> {
  const target = new URL(targetUrl);
  const pairs = new Set<Pair>();
  const state = {
    armed: undefined as (ClaimCut & { done: () => void }) | undefined,
    refusing: false,
    refused: 0,
  };

  function resetAll() {
    for (const p of pairs) {
      p.client.resetAndDestroy();
      p.server.resetAndDestroy();
    }
    pairs.clear();
  }

  /** The server's bytes after a claim was sent on this pair: held until its answer is complete. */
  function watchAnswer(held: Buffer[], chunk: Buffer): 'wait' | 'forward' | 'cut' {
    held.push(chunk);
    const all = Buffer.concat(held);
    let rows = false;
    for (let at = 0; at + 5 <= all.length;) {
      const type = all[at]!;
      const end = at + 1 + all.readInt32BE(at + 1);
      if (end > all.length) return 'wait';
      if (type === DATA_ROW) rows = true;
      if (type === READY_FOR_QUERY) return rows ? 'cut' : 'forward';
      at = end;
    }
    return 'wait';
  }

  const server = net.createServer((client) => {
    client.on('error', () => {});
    if (state.refusing) {
      state.refused++;
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    upstream.on('error', () => {});
    const pair: Pair = { client, server: upstream };
    pairs.add(pair);
    // Set when a claim is sent on this connection, armed or not: the server's bytes from then on
    // are the claim's answer, held until it is whole. Whether to cut is decided when the answer is
    // complete, not when the claim was sent: a claim sent just before the cut was armed (a worker's
    // first look, as it starts) can still be executed after the job it should find was committed,
    // and its answer, with rows, arrives armed. Deciding at send time let that one through, and the
    // test waited for a cut that never came.
    let held: Buffer[] | undefined;
    client.on('data', (chunk: Buffer) => {
      if (!held && chunk.includes(CLAIM_STATEMENT)) held = [];
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!held) return void client.write(chunk);
      const next = watchAnswer(held, chunk);
      if (next === 'wait') return;
      const answer = Buffer.concat(held);
      held = undefined;
      const armed = state.armed;
      if (next === 'forward' || !armed) return void client.write(answer);
      state.armed = undefined;
      state.refusing = armed.refuse ?? false;
      state.refused = 0;
      resetAll();
      armed.onCut?.();
      armed.done();
    });
    const drop = () => {
      if (!pairs.delete(pair)) return;
      client.destroy();
      upstream.destroy();
    };
    client.on('close', drop);
    upstream.on('close', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(targetUrl);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);

  return {
    url: url.toString(),
    cutNextClaim(options = {}) {
      return new Promise<void>((done) => (state.armed = { ...options, done }));
    },
    reopen() {
      state.refusing = false;
    },
    refused: () => state.refused,
    async close() {
      state.armed = undefined;
      resetAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
