import type { Viewer } from '../service/access/access.js';
import { ApiKeyRef, RoleEnum } from './access.js';
import { builder } from './builder.js';
import { WorkspaceRef } from './workspace.js';

export const ViewerRef = builder.objectRef<Viewer>('Viewer').implement({
  description: 'Who you are: the role and workspace of your credentials, and your API key (never the key itself).',
  fields: (t) => ({
    role: t.field({ type: RoleEnum, description: 'What your key may do.', resolve: (v) => v.role }),
    installationAdmin: t.exposeBoolean('installationAdmin', { description: 'Whether your key may create workspaces.' }),
    workspace: t.field({ type: WorkspaceRef, description: 'The workspace your key belongs to.', resolve: (v) => v.workspace }),
    apiKey: t.field({
      type: ApiKeyRef,
      nullable: true,
      description: 'Your API key (name, prefix, role); null for jobgate itself and the embedding application.',
      resolve: (v) => v.apiKey,
    }),
  }),
});
