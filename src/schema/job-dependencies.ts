/** A job's prerequisites and dependents on Job, and the prerequisite on each edge. */
import { builder } from './builder.js';
import { pageArgs } from './common.js';
import { JobConnectionRef, JobRef } from './job.js';
import { JobDependencyRef, PrerequisiteFailurePolicyEnum } from './prerequisites.js';

builder.objectFields(JobDependencyRef, (t) => ({
  prerequisite: t.field({
    type: JobRef,
    description: 'The job waited for.',
    resolve: (d, _args, ctx) => ctx.service.job(ctx.actor, d.prerequisiteId),
  }),
}));

builder.objectFields(JobRef, (t) => ({
  onPrerequisiteFailure: t.field({
    type: PrerequisiteFailurePolicyEnum,
    nullable: true,
    description:
      'A job created with dependsOn: what happens when one of them FAILED or was CANCELLED. null for a job without prerequisites.',
    resolve: (j) => j.onPrerequisiteFailure,
  }),
  dependsOn: t.field({
    type: [JobDependencyRef],
    description:
      'The jobs this job waits for (createJob dependsOn), in the order named, each with its outcome once it has ended. Its execution starts only once each has SUCCEEDED (see onPrerequisiteFailure). Empty for a job without prerequisites.',
    resolve: (j, _args, ctx) => ctx.service.jobDependencies(ctx.actor, j.id),
  }),
  dependents: t.field({
    type: JobConnectionRef,
    description: 'The jobs that name this one in their dependsOn, in id order.',
    args: { ...pageArgs(t.arg) },
    resolve: (j, page, ctx) => ctx.service.jobDependents(ctx.actor, j.id, page),
  }),
}));
