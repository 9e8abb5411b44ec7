import type { Workspace } from '../service/kernel/models.js';
import { updateWorkspaceSchema } from '../service/access/access.js';
import { builder } from './builder.js';
import { DateTimeScalar, nodeId, zodInput } from './common.js';

export const WorkspaceRef = builder.nodeRef<Workspace>('Workspace', { id: nodeId() }).implement({
  description: 'A tenant. Everything you create lives in exactly one workspace, the one of your credentials.',
  fields: (t) => ({
    slug: t.exposeString('slug', { description: 'Short unique name, e.g. "default".' }),
    name: t.exposeString('name', { description: 'Display name.' }),
    concurrencyLimit: t.exposeInt('concurrencyLimit', {
      nullable: true,
      description:
        "Most attempts in flight at once across the workspace's endpoints (jobgate's own INTERNAL ones apart), across all workers; null is no cap. Set with updateWorkspace.",
    }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When the workspace was created.', resolve: (w) => w.createdAt }),
  }),
});

export const UpdateWorkspaceInputRef = builder.inputType('UpdateWorkspaceInput', {
  description: 'Changes to your workspace; a field left out stays as it is.',
  fields: (t) => ({
    name: t.string({ description: 'Display name, 1 to 200 characters.' }),
    concurrencyLimit: t.int({
      description:
        "Most attempts in flight at once across the workspace's endpoints, 1 to 100000, across all workers (jobgate's own INTERNAL endpoints apart); null removes the cap.",
    }),
  }),
});
export const updateWorkspaceValidation = zodInput(updateWorkspaceSchema);
