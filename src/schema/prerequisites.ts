/**
 * The types of a job's prerequisites (createJob dependsOn): the policy on a failed one, how one
 * ended, and the edge itself. Linked to Job in ./job-dependencies.ts.
 */
import type { JobDependency } from '../service/kernel/models.js';
import { builder } from './builder.js';
import { DateTimeScalar } from './common.js';

export const PrerequisiteFailurePolicyEnum = builder.enumType('PrerequisiteFailurePolicy', {
  description: 'What happens to a job created with dependsOn when one of those jobs FAILED (every attempt) or was CANCELLED.',
  values: {
    CANCEL: { description: 'The job is retired and its waiting execution cancelled, saying which prerequisite ended how (the default).' },
    RUN: { description: 'The job starts anyway, once every prerequisite has ended, however it ended.' },
  } as const,
});

export const PrerequisiteOutcomeEnum = builder.enumType('PrerequisiteOutcome', {
  description: "How a prerequisite job ended: its scheduled execution's final status.",
  values: {
    SUCCEEDED: { description: 'It succeeded.' },
    FAILED: { description: 'Every attempt failed.' },
    CANCELLED: { description: 'It was cancelled (its job or its execution).' },
  } as const,
});

export const JobDependencyRef = builder.objectRef<JobDependency>('JobDependency').implement({
  description:
    'One prerequisite of a job (createJob dependsOn): the job it waits for and how that job ended. What counts is the prerequisite\'s scheduled execution; a "Run now" of it is an extra run and does not.',
  fields: (t) => ({
    outcome: t.field({
      type: PrerequisiteOutcomeEnum,
      nullable: true,
      description: 'How it ended; null while it has not ended. Settled once: a later re-drive of a failed prerequisite does not change it.',
      resolve: (d) => d.outcome,
    }),
    settledAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When the outcome was recorded; null while it has none.',
      resolve: (d) => d.settledAt,
    }),
  }),
});
