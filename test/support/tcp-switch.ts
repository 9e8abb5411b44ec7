/**
 * The address jobgate's processes connect to, as a managed Postgres gives one: a TCP front that
 * forwards to whichever server currently holds the role, and moves when a replica is promoted.
 * Moving it resets every forwarded connection (those to the old server are gone anyway), and
 * between `cut` and `moveTo` new connections are reset at once, as an address that points
 * nowhere yet would refuse them. It never reads or changes a byte it forwards.
 */
import net from 'node:net';

export interface TcpSwitch {
  /** A postgres URL for `database` through the switch. */
  url(database: string): string;
  /** Resets every connection and refuses new ones until `moveTo`. */
  cut(): void;
  /** Forwards new connections to `port` on 127.0.0.1 from now on (and stops refusing them). */
  moveTo(port: number): void;
  /** Connections accepted and then refused while cut. */
  refused(): number;
  close(): Promise<void>;
}

export async function startTcpSwitch(initialPort: number): Promise<TcpSwitch> {
  let target: number | undefined = initialPort;
  let refused = 0;
  const pairs = new Set<[net.Socket, net.Socket]>();
  const server = net.createServer((client) => {
    if (target === undefined) {
      refused++;
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(target, '127.0.0.1');
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const resetAll = () => {
    for (const [client, upstream] of pairs) {
      client.resetAndDestroy();
      upstream.resetAndDestroy();
    }
    pairs.clear();
  };
  return {
    url: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    cut() {
      target = undefined;
      resetAll();
    },
    moveTo(next) {
      resetAll();
      target = next;
    },
    refused: () => refused,
    async close() {
      target = undefined;
      resetAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
