/**
 * `npm run bench`: every benchmark of jobgate. Prints a table; with `--json`, one JSON object
 * per figure: {"bench", "system", "value", "unit"}, for comparing across commits.
 *
 * Each benchmark is a module in bench/ exporting `run(): Promise<Figure[]>`.
 */
import { run as bounds } from './bounds.js';
import { run as bulkEnqueue } from './bulk-enqueue.js';
import { run as createJob } from './create-job.js';
import { run as consoleBench } from './console.js';
import { run as cron } from './cron.js';
import { run as engine } from './engine.js';
import { run as engineHistory } from './engine-history.js';
import { run as intervals } from './intervals.js';
import { run as live } from './live.js';
import { run as liveFanout } from './live-fanout.js';
import { run as metrics } from './metrics.js';
import { run as pooler } from './pooler.js';
import { run as topology } from './topology.js';
import { run as lists } from './lists.js';
import { run as recoverable } from './recoverable.js';
import { run as retention } from './retention.js';
import { run as retentionWeek } from './retention-week.js';
import { run as workflows } from './workflows.js';

export interface Figure {
  bench: string;
  system: string;
  value: number;
  unit: string;
}

type Bench = { name: string; run: () => Promise<Figure[]> };

const benches: Bench[] = [
  { name: 'engine', run: engine },
  { name: 'engine-history', run: engineHistory },
  { name: 'cron', run: cron },
  { name: 'recoverable', run: recoverable },
  { name: 'live', run: live },
  { name: 'live-fanout', run: liveFanout },
  { name: 'intervals', run: intervals },
  { name: 'metrics', run: metrics },
  { name: 'lists', run: lists },
  { name: 'create-job', run: createJob },
  { name: 'bulk-enqueue', run: bulkEnqueue },
  { name: 'bounds', run: bounds },
  { name: 'console', run: consoleBench },
  { name: 'retention', run: retention },
  { name: 'retention-week', run: retentionWeek },
  { name: 'pooler', run: pooler },
  { name: 'topology', run: topology },
  { name: 'workflows', run: workflows },
];

async function main() {
  const json = process.argv.includes('--json');
  const only = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  const selected = benches.filter((b) => only.length === 0 || only.includes(b.name));
  if (selected.length === 0) {
    console.log(`no benchmark named ${only.join(', ')}; there are: ${benches.map((b) => b.name).join(', ')}`);
    process.exitCode = 2;
    return;
  }
  const figures: Figure[] = [];
  for (const b of selected) figures.push(...(await b.run()));
  if (json) {
    for (const f of figures) console.log(JSON.stringify(f));
    return;
  }
  const rows = figures.map((f) => [f.bench, f.system, f.value.toFixed(f.value < 10 ? 2 : 0), f.unit]);
  const widths = [0, 1, 2, 3].map((i) => Math.max(...[['bench', 'system', 'value', 'unit'], ...rows].map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === 2 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  console.log(line(['bench', 'system', 'value', 'unit']));
  for (const r of rows) console.log(line(r));
}

await main();
