/**
 * `npm run bench:compare -- <base> [bench ...] [--rounds N]`: paired runs, old and new.
 *
 * A refactor claims "no regression beyond noise"; one run of each side on a shared machine
 * cannot show that, because the machine's noise between two runs minutes apart is often larger
 * than the change. So the two sides run interleaved (base, head, base, head, ...), each round a
 * fresh process on the same Postgres, and every figure is printed with both medians, the ratio
 * head ÷ base and each side's spread (min to max over the rounds). A ratio whose distance from 1
 * is inside the spreads is noise.
 *
 * The base is checked out into a temporary git worktree that borrows this checkout's
 * node_modules (a base whose package-lock.json differs is refused: its figures would measure the
 * dependencies, not the change). Benchmarks run from source with tsx, as `npm run bench` does.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Figure } from './run.js';

const ROOT = path.resolve(import.meta.dirname, '..');

function usage(message: string): never {
  console.error(`${message}\nusage: npm run bench:compare -- <base git ref> [bench ...] [--rounds N]`);
  process.exit(2);
}

function parseArgs(argv: string[]) {
  let rounds = 3;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--rounds') {
      rounds = Number(argv[++i]);
      if (!Number.isInteger(rounds) || rounds < 1) usage('--rounds takes a whole number of 1 or more');
    } else rest.push(argv[i]!);
  }
  const [base, ...benches] = rest;
  if (!base) usage('no base ref given');
  return { base, benches, rounds };
}

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

/** Runs `bench/run.ts --json` in `dir` and returns its figures; the bench's own output passes through to stderr. */
function runBench(dir: string, benches: string[]): Promise<Figure[]> {
  return new Promise((resolve, reject) => {
    const tsx = path.join(ROOT, 'node_modules', '.bin', 'tsx');
    const child = spawn(tsx, [path.join(dir, 'bench', 'run.ts'), '--json', ...benches], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`bench in ${dir} exited with ${code}`));
      const figures = out
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Figure);
      resolve(figures);
    });
  });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const fmt = (v: number) => (Math.abs(v) < 10 ? v.toFixed(2) : v.toFixed(0));

async function main() {
  const { base, benches, rounds } = parseArgs(process.argv.slice(2));
  const baseSha = git('rev-parse', '--verify', `${base}^{commit}`);
  const headSha = git('rev-parse', 'HEAD');
  if (git('diff', '--name-only', baseSha, 'HEAD', '--', 'package-lock.json') !== '') {
    usage(`package-lock.json differs between ${base} and HEAD: install the base's dependencies and run its bench by hand`);
  }
  const baseDir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-bench-base-'));
  git('worktree', 'add', '--detach', baseDir, baseSha);
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(baseDir, 'node_modules'), 'dir');
  try {
    const samples = new Map<string, { unit: string; base: number[]; head: number[] }>();
    for (let round = 1; round <= rounds; round++) {
      for (const [side, dir] of [
        ['base', baseDir],
        ['head', ROOT],
      ] as const) {
        console.error(`--- round ${round}/${rounds}: ${side} ---`);
        for (const f of await runBench(dir, benches)) {
          // With the unit: one bench may print several figures of one system (live-fanout does).
          const key = `${f.bench}  ${f.system}  ${f.unit}`;
          const entry = samples.get(key) ?? { unit: f.unit, base: [], head: [] };
          entry[side].push(f.value);
          samples.set(key, entry);
        }
      }
    }
    console.log(`base ${base} (${baseSha.slice(0, 8)}) vs head ${headSha.slice(0, 8)}, ${rounds} interleaved rounds`);
    const rows = [['figure', 'base median', 'head median', 'head÷base', 'base spread', 'head spread', 'unit']];
    // A figure one side does not print (new, or gone) is shown with a dash for that side, so a
    // change that adds a figure shows it.
    const spread = (xs: number[]) => (xs.length === 0 ? '-' : `${fmt(Math.min(...xs))}..${fmt(Math.max(...xs))}`);
    for (const [key, s] of samples) {
      const b = s.base.length === 0 ? undefined : median(s.base);
      const h = s.head.length === 0 ? undefined : median(s.head);
      rows.push([
        key.slice(0, key.length - s.unit.length - 2),
        b === undefined ? '-' : fmt(b),
        h === undefined ? '-' : fmt(h),
        b === undefined || h === undefined || b === 0 ? '-' : (h / b).toFixed(2),
        spread(s.base),
        spread(s.head),
        s.unit,
      ]);
    }
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
    for (const r of rows) console.log(r.map((c, i) => (i === 0 || i === 6 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '));
  } finally {
    git('worktree', 'remove', '--force', baseDir);
  }
}

await main();
