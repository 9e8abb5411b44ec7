/**
 * Run watches (runProgress): a run's latest state, re-read when a hint (`r:<run id>`) names it,
 * pushed when its status, progress, stats or update time moved (./state-watches.ts); complete
 * once the run is COMPLETED or FAILED.
 */
import { runsById } from '../../db/statements/events.js';
import { toRun, type Run } from '../../service/runs/runs.js';
import { StateWatches, type StateWatchesOptions } from './state-watches.js';

const TERMINAL = new Set(['COMPLETED', 'FAILED']);

export class RunWatches extends StateWatches<Run> {
  constructor(options: StateWatchesOptions) {
    super(options, {
      plural: 'runs',
      read: async (pool, ids) => (await runsById(pool, ids)).map(toRun),
      idOf: (run) => run.id,
      keyOf: (run) => `${run.status}|${run.processed}|${run.total}|${run.updatedAt.getTime()}|${JSON.stringify(run.stats)}`,
      terminal: (run) => TERMINAL.has(run.status),
    });
  }
}
