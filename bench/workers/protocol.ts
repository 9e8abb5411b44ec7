/**
 * The child side of bench/support/children.ts: lines on stdout to the benchmark, commands on
 * stdin from it; a closed stdin means the benchmark is gone or done, and the child must exit.
 */
import { createInterface } from 'node:readline';

export function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

const waiting = new Map<string, () => void>();
const seen = new Set<string>();
createInterface({ input: process.stdin }).on('line', (l) => {
  const cmd = l.trim();
  const w = waiting.get(cmd);
  if (w) {
    waiting.delete(cmd);
    w();
  } else seen.add(cmd);
});

/** Resolves when the benchmark sends `cmd`. */
export function command(cmd: string): Promise<void> {
  if (seen.delete(cmd)) return Promise.resolve();
  return new Promise((resolve) => waiting.set(cmd, resolve));
}

/** Runs `fn` when stdin closes, then exits (with a hard deadline). */
export function onEnd(fn: () => Promise<unknown>): void {
  process.stdin.once('end', () => {
    setTimeout(() => process.exit(0), 5000).unref();
    void fn()
      .catch((e: Error) => process.stderr.write(`shutdown: ${e.message}\n`))
      .finally(() => process.exit(0));
  });
}

export function envNumber(name: string, fallback: number): number {
  const v = process.env[name];
  return v === undefined || v === '' ? fallback : Number(v);
}
