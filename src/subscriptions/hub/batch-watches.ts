/**
 * Batch watches (batchProgress): a batch's latest counts and state, re-read when a hint
 * (`b:<batch id>`, migration 000049) names it, pushed when a member was added or counted, or the
 * batch was closed or completed (./state-watches.ts); complete once the batch has completed, after
 * which none of them can change.
 */
import { batchesById } from '../../db/statements/batch-progress.js';
import { toBatch, type Batch } from '../../service/kernel/models.js';
import { StateWatches, type StateWatchesOptions } from './state-watches.js';

export class BatchWatches extends StateWatches<Batch> {
  constructor(options: StateWatchesOptions) {
    super(options, {
      plural: 'batches',
      read: async (pool, ids) => (await batchesById(pool, ids)).map(toBatch),
      idOf: (batch) => batch.id,
      keyOf: (b) => `${b.open}|${b.total}|${b.succeeded}|${b.failed}|${b.cancelled}|${b.completedAt?.getTime() ?? ''}`,
      terminal: (batch) => batch.completedAt !== null,
    });
  }
}
