import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(() => t.close());

describe('endpoints', () => {
  it('stores payload-spec and config references given at registration in their columns', async () => {
    const spec = await t.service.createPayloadSpec(t.actor, { name: 'ref.spec', jsonSchema: { type: 'object' } });
    const config = await t.service.setConfig(t.actor, { name: 'ref.config', entries: [{ key: 'token', value: 'tok3n', secret: true }] });
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'ref.at-create',
      kind: 'HTTP',
      url: 'https://x.example/{{config.token}}',
      payloadSpecId: spec.id,
      configId: config.id,
    });
    const { rows } = await t.query('select payload_spec_id, config_id from endpoints where id = $1', [ep.id]);
    expect(rows[0]).toEqual({ payload_spec_id: spec.id, config_id: config.id });
  });

  it('sets, swaps and clears references on update, each in its own column', async () => {
    const specA = await t.service.createPayloadSpec(t.actor, { name: 'upd.spec-a', jsonSchema: true });
    const configA = await t.service.setConfig(t.actor, { name: 'upd.config-a', entries: [] });
    const configB = await t.service.setConfig(t.actor, { name: 'upd.config-b', entries: [] });
    const ep = await t.service.registerEndpoint(t.actor, { name: 'ref.at-update', kind: 'HANDLER', handlerName: 'h' });
    const col = async () => (await t.query('select payload_spec_id, config_id from endpoints where id = $1', [ep.id])).rows[0];

    await t.service.updateEndpoint(t.actor, { id: ep.id, payloadSpecId: specA.id, configId: configA.id });
    expect(await col()).toEqual({ payload_spec_id: specA.id, config_id: configA.id });
    // Absent leaves a reference alone; a value replaces it.
    await t.service.updateEndpoint(t.actor, { id: ep.id, configId: configB.id });
    expect(await col()).toEqual({ payload_spec_id: specA.id, config_id: configB.id });
    // null clears it.
    await t.service.updateEndpoint(t.actor, { id: ep.id, payloadSpecId: null });
    expect(await col()).toEqual({ payload_spec_id: null, config_id: configB.id });
  });

  it('refuses references to another workspace as NOT_FOUND', async () => {
    const foreign = await t.service.createPayloadSpec(t.otherActor, { name: 'foreign.spec', jsonSchema: true });
    expect(
      await codeOf(() =>
        t.service.registerEndpoint(t.actor, { name: 'x.y', kind: 'HANDLER', handlerName: 'h', payloadSpecId: foreign.id }),
      ),
    ).toBe('NOT_FOUND');
  });

  it('is CONFLICT for a second live endpoint with the same name, and frees the name on archive', async () => {
    const ep = await t.service.registerEndpoint(t.actor, { name: 'dup.name', kind: 'HANDLER', handlerName: 'h' });
    expect(await codeOf(() => t.service.registerEndpoint(t.actor, { name: 'dup.name', kind: 'HANDLER', handlerName: 'h' }))).toBe(
      'CONFLICT',
    );
    await t.service.archiveEndpoint(t.actor, ep.id);
    const again = await t.service.registerEndpoint(t.actor, { name: 'dup.name', kind: 'HANDLER', handlerName: 'h' });
    expect(again.id).not.toBe(ep.id);
  });

  it('allows the same name in two workspaces', async () => {
    await t.service.registerEndpoint(t.actor, { name: 'same.in-both', kind: 'HANDLER', handlerName: 'h' });
    await expect(
      t.service.registerEndpoint(t.otherActor, { name: 'same.in-both', kind: 'HANDLER', handlerName: 'h' }),
    ).resolves.toBeTruthy();
  });

  it('validates names and kind-specific fields with paths', async () => {
    const bad = (await t.service
      .registerEndpoint(t.actor, { name: 'Not Dotted!', kind: 'HTTP', url: 'ftp://x', handlerName: 'h' })
      .catch((e) => e)) as { issues: { path: string[] }[] };
    expect(bad.issues.map((i) => i.path.join('.')).sort()).toEqual(['handlerName', 'name', 'url']);
    expect(await codeOf(() => t.service.registerEndpoint(t.actor, { name: 'h.no-name', kind: 'HANDLER' }))).toBe('VALIDATION_FAILED');
  });

  it('refuses a secret config value too short to be redacted (VALIDATION_FAILED), storing nothing', async () => {
    const err = await t.service
      .setConfig(t.actor, {
        name: 'short.secret',
        entries: [
          { key: 'host', value: 'a' },
          { key: 'pin', value: '123', secret: true },
        ],
      })
      .catch((e) => e);
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.issues).toEqual([expect.objectContaining({ path: ['entries', 1, 'value'] })]);
    expect((await t.query(`select count(*)::int as n from configs where name = 'short.secret'`)).rows[0].n).toBe(0);
    // Short values that are not secret are fine, and so is a secret of four characters.
    await expect(
      t.service.setConfig(t.actor, {
        name: 'short.secret',
        entries: [
          { key: 'host', value: 'a' },
          { key: 'pin', value: '1234', secret: true },
        ],
      }),
    ).resolves.toBeDefined();
  });

  it("refuses a Host header (another site behind the url's address) and a header named twice in two cases, storing nothing", async () => {
    const register = (name: string, headers: Record<string, string>) =>
      t.service.registerEndpoint(t.actor, { name, kind: 'HTTP', url: 'https://x.example/hook', headers }).catch((e) => e);
    const host = await register('headers.host', { HOST: 'internal.example' });
    expect(host.code).toBe('VALIDATION_FAILED');
    expect(host.issues).toEqual([expect.objectContaining({ path: ['headers', 'HOST'], message: "is taken from the url's host" })]);
    const twice = await register('headers.twice', { 'X-Dup': '1', 'x-dup': '2' });
    expect(twice.code).toBe('VALIDATION_FAILED');
    expect(twice.issues).toEqual([expect.objectContaining({ path: ['headers', 'x-dup'] })]);
    expect((await t.query(`select count(*)::int as n from endpoints where name like 'headers.%'`)).rows[0].n).toBe(0);
  });

  it('refuses a handler name no worker could register (a space, a bidirectional control), on registration and update, storing nothing', async () => {
    for (const handlerName of ['send invoice', 'send\u202Eeciovni', 'x'.repeat(201)]) {
      const refused = await t.service.registerEndpoint(t.actor, { name: 'handlers.odd', kind: 'HANDLER', handlerName }).catch((e) => e);
      expect(refused.code, handlerName).toBe('VALIDATION_FAILED');
      expect(refused.issues).toEqual([
        expect.objectContaining({ path: ['handlerName'], message: expect.stringMatching(/^must be 1-200 letters, digits/) }),
      ]);
    }
    expect((await t.query(`select count(*)::int as n from endpoints where name = 'handlers.odd'`)).rows[0].n).toBe(0);
    const ok = await t.service.registerEndpoint(t.actor, {
      name: 'handlers.odd',
      kind: 'HANDLER',
      handlerName: 'billing:send-invoice_v2.1',
    });
    const update = await t.service.updateEndpoint(t.actor, { id: ok.id, handlerName: 'billing send' }).catch((e) => e);
    expect(update.code).toBe('VALIDATION_FAILED');
    expect((await t.query('select handler_name from endpoints where id = $1', [ok.id])).rows[0].handler_name).toBe(
      'billing:send-invoice_v2.1',
    );
  });

  it('never returns the signing secret, only whether one is set', async () => {
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'signed.hook',
      kind: 'HTTP',
      url: 'https://x.example/hook',
      signingSecret: 'whsec_0123456789abcdef',
    });
    expect(ep.hasSigningSecret).toBe(true);
    expect(JSON.stringify(ep)).not.toContain('whsec_0123456789abcdef');
  });

  it('refuses to archive an endpoint with live jobs (CONFLICT), and allows it once they are retired', async () => {
    const ep = await t.service.registerEndpoint(t.actor, { name: 'busy.target', kind: 'HANDLER', handlerName: 'h' });
    const { job } = await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE' });
    expect(await codeOf(() => t.service.archiveEndpoint(t.actor, ep.id))).toBe('CONFLICT');
    await t.service.cancelJob(t.actor, job.id);
    expect((await t.service.archiveEndpoint(t.actor, ep.id)).archivedAt).toBeInstanceOf(Date);
    expect(await codeOf(() => t.service.updateEndpoint(t.actor, { id: ep.id, description: 'x' }))).toBe('ARCHIVED');
  });

  it('refuses changes to internal endpoints from users', async () => {
    const ep = await t.service.registerEndpoint(
      t.systemActor,
      { name: 'system.thing', kind: 'HANDLER', handlerName: 'h' },
      { type: 'INTERNAL' },
    );
    expect(await codeOf(() => t.service.updateEndpoint(t.actor, { id: ep.id, description: 'mine now' }))).toBe('FORBIDDEN');
    expect(await codeOf(() => t.service.archiveEndpoint(t.actor, ep.id))).toBe('FORBIDDEN');
    expect(
      await codeOf(() =>
        t.service.registerEndpoint(t.actor, { name: 'sneaky.one', kind: 'HANDLER', handlerName: 'h' }, { type: 'INTERNAL' }),
      ),
    ).toBe('FORBIDDEN');
  });
});

describe('payload specs and configs', () => {
  it('refuses a document that is not a valid JSON Schema', async () => {
    const error = (await t.service
      .createPayloadSpec(t.actor, { name: 'broken.spec', jsonSchema: { type: 'no-such-type' } })
      .catch((e) => e)) as { code: string; issues: { path: string[] }[] };
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.issues[0]!.path).toEqual(['jsonSchema']);
    expect((await t.query("select count(*)::int as n from payload_specs where name = 'broken.spec'")).rows[0].n).toBe(0);
  });

  it('bumps the version when the schema changes, and new jobs are checked against the new one', async () => {
    const spec = await t.service.createPayloadSpec(t.actor, { name: 'evolving.spec', jsonSchema: { type: 'object' } });
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'evolving.target',
      kind: 'HANDLER',
      handlerName: 'h',
      payloadSpecId: spec.id,
    });
    await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: {} });
    const v2 = await t.service.updatePayloadSpec(t.actor, { id: spec.id, jsonSchema: { type: 'object', required: ['x'] } });
    expect(v2.version).toBe(2);
    expect(await codeOf(() => t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: {} }))).toBe('VALIDATION_FAILED');
  });

  it('checks each spec against its own schema when two share a $id, across workspaces and versions', async () => {
    const $id = 'https://specs.example/order';
    const mine = await t.service.createPayloadSpec(t.actor, { name: 'same-id.mine', jsonSchema: { $id, type: 'object' } });
    const myEp = await t.service.registerEndpoint(t.actor, {
      name: 'same-id.mine',
      kind: 'HANDLER',
      handlerName: 'h',
      payloadSpecId: mine.id,
    });
    await t.service.createJob(t.actor, { endpointId: myEp.id, kind: 'IMMEDIATE', input: {} });

    const theirs = await t.service.createPayloadSpec(t.otherActor, {
      name: 'same-id.theirs',
      jsonSchema: { $id, type: 'object', required: ['z'] },
    });
    const theirEp = await t.service.registerEndpoint(t.otherActor, {
      name: 'same-id.theirs',
      kind: 'HANDLER',
      handlerName: 'h',
      payloadSpecId: theirs.id,
    });
    const refused = (await t.service.createJob(t.otherActor, { endpointId: theirEp.id, kind: 'IMMEDIATE', input: {} }).catch((e) => e)) as {
      code: string;
      issues: { path: unknown[] }[];
    };
    expect(refused.code).toBe('VALIDATION_FAILED');
    expect(refused.issues.map((i) => i.path)).toEqual([['input', 'z']]);
    await expect(t.service.createJob(t.otherActor, { endpointId: theirEp.id, kind: 'IMMEDIATE', input: { z: 1 } })).resolves.toBeTruthy();

    // A new version keeping its $id replaces the old one rather than colliding with it.
    await t.service.updatePayloadSpec(t.actor, { id: mine.id, jsonSchema: { $id, type: 'object', required: ['y'] } });
    expect(await codeOf(() => t.service.createJob(t.actor, { endpointId: myEp.id, kind: 'IMMEDIATE', input: {} }))).toBe(
      'VALIDATION_FAILED',
    );
  });

  it('refuses a schema whose $ref cycle never reaches into the input, and keeps ones that recurse through it', async () => {
    for (const [name, jsonSchema] of [
      ['loop.self', { $ref: '#' }],
      ['loop.pair', { $defs: { a: { $ref: '#/$defs/b' }, b: { allOf: [{ $ref: '#/$defs/a' }] } }, $ref: '#/$defs/a' }],
      // Overflows ajv's compiler itself: its message said "Maximum call stack size exceeded".
      ['loop.def', { $defs: { a: { $ref: '#/$defs/a' } }, $ref: '#/$defs/a' }],
    ] as const) {
      const error = (await t.service.createPayloadSpec(t.actor, { name, jsonSchema }).catch((e) => e)) as {
        code: string;
        message: string;
        issues: { path: unknown[] }[];
      };
      expect(error.code).toBe('VALIDATION_FAILED');
      expect(error.issues[0]!.path).toEqual(['jsonSchema']);
      expect(error.message, name).toMatch(/refers to itself without end/);
    }
    expect((await t.query("select count(*)::int as n from payload_specs where name like 'loop.%'")).rows[0].n).toBe(0);

    const tree = await t.service.createPayloadSpec(t.actor, {
      name: 'tree.node',
      jsonSchema: { type: 'object', properties: { children: { type: 'array', items: { $ref: '#' } } }, additionalProperties: false },
    });
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'tree.target',
      kind: 'HANDLER',
      handlerName: 'h',
      payloadSpecId: tree.id,
    });
    await expect(
      t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: { children: [{ children: [] }] } }),
    ).resolves.toBeTruthy();
    const deep = (await t.service
      .createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: { children: [{ x: 1 }] } })
      .catch((e) => e)) as {
      issues: { path: unknown[] }[];
    };
    expect(deep.issues.map((i) => i.path)).toEqual([['input', 'children', 0]]);
  });

  it('answers VALIDATION_FAILED, not a crash, for a looping spec stored before such specs were refused', async () => {
    const spec = await t.service.createPayloadSpec(t.actor, { name: 'legacy.loop', jsonSchema: { type: 'object' } });
    await t.query(`update payload_specs set json_schema = '{"$ref": "#"}'::jsonb, version = version + 1 where id = $1`, [spec.id]);
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'legacy.loop',
      kind: 'HANDLER',
      handlerName: 'h',
      payloadSpecId: spec.id,
    });
    const error = (await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: {} }).catch((e) => e)) as {
      code: string;
      issues: { path: unknown[] }[];
    };
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.issues[0]!.path).toEqual(['input']);
    expect((await t.query('select count(*)::int as n from jobs where endpoint_id = $1', [ep.id])).rows[0].n).toBe(0);
  });

  it('checks patterns in time linear in the input, so a backtracking-prone pattern cannot stall the gateway', async () => {
    // On a backtracking engine this pattern takes about 2^n steps on n "a"s and a "!": seconds at
    // 30, hours at 40. At 40 the call cannot finish within the test's timeout unless the engine
    // is linear; no wall-clock bound is asserted (the figure is the benchmark's to print).
    const spec = await t.service.createPayloadSpec(t.actor, {
      name: 'redos.spec',
      jsonSchema: {
        type: 'object',
        properties: { id: { type: 'string', pattern: '^(a+)+$' } },
        patternProperties: { '^(b+)+$': { type: 'number' } },
      },
    });
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'redos.target',
      kind: 'HANDLER',
      handlerName: 'h',
      payloadSpecId: spec.id,
    });
    await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: { id: 'aaa' } });
    const error = (await t.service
      .createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: { id: `${'a'.repeat(40)}!`, [`${'b'.repeat(40)}!`]: 'x' } })
      .catch((e) => e)) as { code: string; issues: { path: unknown[] }[] };
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.issues.map((i) => i.path)).toEqual([['input', 'id']]);
  });

  it('refuses a pattern that needs backtracking (lookaround, backreferences) when the spec is created', async () => {
    for (const pattern of ['^(?!admin).*$', '^(a)\\1$']) {
      const error = (await t.service
        .createPayloadSpec(t.actor, { name: 'backtrack.spec', jsonSchema: { type: 'string', pattern } })
        .catch((e) => e)) as { code: string; issues: { path: unknown[]; message: string }[] };
      expect(error.code).toBe('VALIDATION_FAILED');
      expect(error.issues[0]!.path).toEqual(['jsonSchema']);
      expect(error.issues[0]!.message).toContain(pattern);
    }
    expect((await t.query("select count(*)::int as n from payload_specs where name = 'backtrack.spec'")).rows[0].n).toBe(0);
  });

  it('answers VALIDATION_FAILED, not a crash, for a lookaround pattern stored before such patterns were refused', async () => {
    const spec = await t.service.createPayloadSpec(t.actor, { name: 'legacy.lookahead', jsonSchema: { type: 'string' } });
    await t.query(
      `update payload_specs set json_schema = '{"type": "string", "pattern": "^(?!x)"}'::jsonb, version = version + 1 where id = $1`,
      [spec.id],
    );
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'legacy.lookahead',
      kind: 'HANDLER',
      handlerName: 'h',
      payloadSpecId: spec.id,
    });
    const error = (await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: 'y' }).catch((e) => e)) as {
      code: string;
      issues: { path: unknown[] }[];
    };
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.issues[0]!.path).toEqual(['input']);
  });

  it('checks uniqueItems in time near-linear in the array, and still finds duplicates whatever their key order', async () => {
    const spec = await t.service.createPayloadSpec(t.actor, {
      name: 'unique.spec',
      jsonSchema: { type: 'object', properties: { rows: { type: 'array', uniqueItems: true } } },
    });
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'unique.target',
      kind: 'HANDLER',
      handlerName: 'h',
      payloadSpecId: spec.id,
    });
    // ajv compares every pair of items: 30,000 took 11 s, so 100,000 would take about 2 minutes,
    // far past the test's timeout; a linear check takes a fraction of a second. No wall-clock
    // bound is asserted (the figure is the benchmark's to print).
    const rows = Array.from({ length: 100_000 }, (_, i) => ({ n: i }));
    await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: { rows } });

    const error = (await t.service
      .createJob(t.actor, {
        endpointId: ep.id,
        kind: 'IMMEDIATE',
        input: { rows: [{ a: 1, b: [1, { c: 2 }] }, 3, { b: [1, { c: 2 }], a: 1 }] },
      })
      .catch((e) => e)) as { code: string; issues: { path: unknown[] }[] };
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.issues.map((i) => i.path)).toEqual([['input', 'rows']]);
    await expect(
      t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: { rows: [1, '1', [1], { 1: 1 }, null, 0] } }),
    ).resolves.toBeTruthy();
  });

  it('lists at most 100 issues of one refused input, and says how many more there were', async () => {
    const spec = await t.service.createPayloadSpec(t.actor, {
      name: 'many.issues',
      jsonSchema: { type: 'array', items: { type: 'string' } },
    });
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'many.issues',
      kind: 'HANDLER',
      handlerName: 'h',
      payloadSpecId: spec.id,
    });
    const error = (await t.service
      .createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: Array.from({ length: 5000 }, () => 1) })
      .catch((e) => e)) as { code: string; issues: { path: unknown[]; message: string }[] };
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.issues).toHaveLength(101);
    expect(error.issues[0]).toEqual({ path: ['input', 0], message: 'must be string' });
    expect(error.issues[100]).toEqual({ path: ['input'], message: 'and 4900 more issue(s) not listed' });
  });

  it('replaces config entries and hides secret values', async () => {
    await t.service.setConfig(t.actor, { name: 'app.settings', entries: [{ key: 'a', value: '1' }] });
    const c = await t.service.setConfig(t.actor, {
      name: 'app.settings',
      entries: [
        { key: 'b', value: '2' },
        { key: 'api_key', value: 'sk-live-123', secret: true },
      ],
    });
    expect(c.entries).toEqual([
      { key: 'api_key', value: null, secret: true },
      { key: 'b', value: '2', secret: false },
    ]);
    expect(
      await codeOf(() =>
        t.service.setConfig(t.actor, {
          name: 'app.settings',
          entries: [
            { key: 'a', value: '1' },
            { key: 'a', value: '2' },
          ],
        }),
      ),
    ).toBe('VALIDATION_FAILED');
  });
});
