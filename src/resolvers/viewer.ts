import { builder } from '../schema/builder.js';
import { ViewerRef } from '../schema/viewer.js';

builder.queryFields((t) => ({
  viewer: t.field({
    type: ViewerRef,
    description: 'Who you are: your role, workspace and API key. Any key may read it.',
    resolve: (_root, _args, ctx) => ctx.service.viewer(ctx.actor),
  }),
}));
