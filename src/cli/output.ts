/**
 * The CLI's stdout and stderr when nobody reads them any more: `jobgate start | tee log` (or
 * `2>&1 | tee`) and Ctrl-C, whose SIGINT reaches the whole pipeline, so `tee` is gone before
 * jobgate writes its shutdown lines. A write to a pipe without a reader fails with EPIPE, which
 * Node raises as an 'error' event on the stream; unhandled, it ends the process half-way through
 * its shutdown, and the embedded Postgres (in a process group of its own, so a terminal's Ctrl-C
 * does not reach it) keeps running. What the process writes there is for a reader who may be
 * gone; stopping what it started is not optional. The process owns its stdio, so this is the
 * CLI's to do, never the library's (it would silence its host's own streams).
 */

/** From now on a failed write to stdout or stderr is dropped, with the rest of what goes there. */
export function outliveClosedOutput(): void {
  // Any write error, not only EPIPE: a terminal that went away (EIO) is the same story.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
}

/** Writes `text` to stdout; resolves with the write's failure (EPIPE: nobody reads), if any. */
export function printOut(text: string): Promise<Error | undefined> {
  return new Promise((resolve) => process.stdout.write(text, (error) => resolve(error ?? undefined)));
}
