/**
 * Cleanup that must happen however a benchmark ends: child processes killed, databases dropped,
 * an embedded cluster stopped. Registered actions run in reverse order from `runCleanup()`, on
 * SIGINT/SIGTERM and on a crash, and (the synchronous part: killing children) on any exit.
 */
type Action = { name: string; run: () => Promise<void> | void; onExit?: () => void };

const actions: Action[] = [];
let installed = false;
let stopping = false;

function install() {
  if (installed) return;
  installed = true;
  // Last resort: an exit we did not see coming still takes the children with it.
  process.on('exit', () => {
    for (const a of actions) a.onExit?.();
  });
  // A crash still drops the databases and stops the embedded cluster.
  const crash = (error: unknown) => {
    // Errors from connections the cleanup itself cut are expected.
    if (stopping) return;
    stopping = true;
    process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    void runCleanup().finally(() => process.exit(1));
  };
  process.on('uncaughtException', crash);
  process.on('unhandledRejection', crash);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      stopping = true;
      process.stderr.write(`bench: ${signal}, cleaning up\n`);
      void runCleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
    });
  }
}

/**
 * Registers an action; the returned function runs it now (once) and unregisters it.
 * `onExit` is a synchronous fallback for process exit (it must not need the event loop).
 */
export function onCleanup(name: string, run: () => Promise<void> | void, onExit?: () => void): () => Promise<void> {
  install();
  const action: Action = { name, run, ...(onExit ? { onExit } : {}) };
  actions.push(action);
  return async () => {
    const i = actions.indexOf(action);
    if (i < 0) return;
    actions.splice(i, 1);
    await action.run();
  };
}

/** Runs every registered action, newest first; failures are reported, not thrown. */
export async function runCleanup(): Promise<void> {
  while (actions.length > 0) {
    const a = actions.pop()!;
    try {
      await a.run();
    } catch (error) {
      process.stderr.write(`bench: cleanup "${a.name}" failed: ${(error as Error).message}\n`);
    }
  }
}
