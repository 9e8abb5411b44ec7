import type { Workspace } from '../service/kernel/models.js';
import { builder } from './builder.js';
import { DateTimeScalar } from './common.js';
import { NodeRef } from './node.js';

export const WorkspaceRef = builder.objectRef<Workspace>('Workspace').implement({
  description: 'A tenant. Everything you create lives in exactly one workspace, the one of your credentials.',
  interfaces: [NodeRef],
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Stable identifier.' }),
    slug: t.exposeString('slug', { description: 'Short unique name, e.g. "default".' }),
    name: t.exposeString('name', { description: 'Display name.' }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When the workspace was created.', resolve: (w) => w.createdAt }),
  }),
});
