/**
 * The request-body limit (JOBGATE_MAX_BODY_BYTES), in front of yoga.
 *
 * A body with a declared length over the limit is refused before it is read. A body without one
 * (`Transfer-Encoding: chunked`) is read here, counted, up to the limit, and only then handed to
 * yoga, already read: counting it beside yoga, as this did before, meant refusing it by
 * destroying the request while yoga read it too, and a socket closed with unread data is reset
 * by the kernel, so a client still sending (Node's fetch) saw ECONNRESET instead of the 413.
 *
 * A refused body is answered at once and then drained, thrown away as it arrives, the answer
 * ended with it, so the client reads the answer; up to DRAIN_FACTOR times the limit, past which
 * the connection is cut (a client that keeps sending that long is not waiting for an answer).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';

const DRAIN_FACTOR = 16;

export function limitRequestBody(req: IncomingMessage, res: ServerResponse, max: number, next: () => void): void {
  if (req.method !== 'POST') return next();
  const declared = req.headers['content-length'];
  if (declared !== undefined) return Number(declared) > max ? refuse(req, res, max, 0) : next();
  if (req.headers['transfer-encoding'] === undefined) return next(); // no body at all
  const chunks: Buffer[] = [];
  let seen = 0;
  const onData = (chunk: Buffer) => {
    seen += chunk.length;
    if (seen <= max) return void chunks.push(chunk);
    req.off('data', onData).off('end', onEnd);
    chunks.length = 0;
    refuse(req, res, max, seen);
  };
  const onEnd = () => {
    // @whatwg-node (under yoga) takes a `body` already read from the request, as it does from
    // body-parsing frameworks; a stream of it, since a Buffer would be walked key by key.
    (req as IncomingMessage & { body?: unknown }).body = Readable.from([Buffer.concat(chunks)]);
    next();
  };
  req.on('data', onData).once('end', onEnd);
}

function refuse(req: IncomingMessage, res: ServerResponse, max: number, alreadyRead: number): void {
  // The answer is written at once, whole (a declared length, so the client needs no closing
  // chunk), but ended only when the body has been read to its end: Node closes a connection whose
  // response ended before its request did, and the bytes the client is still sending then meet a
  // reset (ECONNRESET on its write) instead of the answer.
  if (!res.headersSent) {
    const body = JSON.stringify({
      errors: [{ message: `Request body too large: at most ${max} bytes.`, extensions: { code: 'PAYLOAD_TOO_LARGE' } }],
    });
    res.writeHead(413, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' });
    res.write(body);
  }
  let drained = alreadyRead;
  const onData = (chunk: Buffer) => {
    drained += chunk.length;
    if (drained <= DRAIN_FACTOR * max) return;
    req.off('data', onData);
    // Cut only once the answer has left: destroying at once could drop its last bytes.
    res.end(() => req.destroy());
  };
  req.on('data', onData);
  req.once('end', () => res.end());
  req.once('error', () => res.end());
  req.resume();
}
