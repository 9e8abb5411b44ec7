/**
 * Binding a server to its port, with a refusal a person can act on: Node's own says only
 * "listen EADDRINUSE: address already in use 127.0.0.1:4000", and a second `npm start` in the
 * same checkout met that before anything could say what to do.
 */
import type { Server } from 'node:http';

/** Listens on `host`:`port`; a port in use or not allowed is an error naming `setting`, the variable that moves it. */
export async function listen(server: Server, port: number, host: string, setting: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const refused = (error: NodeJS.ErrnoException) => reject(explained(error, host, port, setting));
    server.once('error', refused);
    server.listen(port, host, () => {
      server.off('error', refused);
      resolve();
    });
  });
}

function explained(error: NodeJS.ErrnoException, host: string, port: number, setting: string): Error {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  if (error.code === 'EADDRINUSE')
    return new Error(
      `${where} is already in use (another jobgate, or another program, listens there): stop it, or set ${setting} to another port`,
      {
        cause: error,
      },
    );
  if (error.code === 'EACCES')
    return new Error(`not allowed to listen on ${where} (ports below 1024 need privileges): set ${setting} to another port`, {
      cause: error,
    });
  return error;
}
