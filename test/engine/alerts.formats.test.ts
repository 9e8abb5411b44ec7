/**
 * What each notification format writes when the values in it are hostile: a job name (any
 * OPERATOR chooses one) and a target's redirect or error text carrying Slack markup, line breaks
 * and the engine's template placeholders. Real webhook receivers on loopback, a real SMTP server,
 * alerts evaluated and delivered by the real engine.
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/environment.js';
import { evaluateAlerts } from '../../src/service/engine/alerts/evaluator.js';
import type { HandlerContext } from '../../src/service/engine/delivery/handler-registry.js';
import { registerInternalHandlers } from '../../src/service/engine/maintenance/reaper.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, settled, type EngineHarness } from '../support/engine.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';

let t: TestDb;
let h: EngineHarness;
let target: HttpTarget;
let smtp: SMTPServer;
const mails: { to: string[]; data: string }[] = [];
let configId: string;

// The secret of the webhook endpoint's config (as a Slack hook's path would be).
const HOOK_SECRET = 'hook-secret-5521-zq';
const SLACK_NAME = 'x <!channel> <https://evil.example/phish|Click to re-authenticate> & {{config.hook}}\n:white_check_mark: Resolved';
// The target's redirect: its Location reaches the execution's error, and so the alert's summary.
const LOCATION = 'https://evil.example/<!here>?a=1&b=<@U123|boss>';

beforeAll(async () => {
  t = await createTestDb();
  target = await startHttpTarget();
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, session, callback) {
      let data = '';
      stream.on('data', (c: Buffer) => (data += c.toString('utf8')));
      stream.on('end', () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address), data });
        callback();
      });
    },
  });
  await new Promise<void>((r) => smtp.listen(0, '127.0.0.1', () => r()));
  h = engineHarness(t);
  registerInternalHandlers(h.handlers, t.database.pool, {
    alerts: {
      smtpUrl: `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`,
      from: 'jobgate@test.local',
      publicUrl: 'https://jobs.example.test/',
    },
  });
  target.route('/redirects', (_req, res) => res.writeHead(302, { location: LOCATION }).end());
  for (const path of ['/slack', '/json']) target.route(path, (_req, res) => res.writeHead(200).end('ok'));
  const config = await t.service.setConfig(t.actor, { name: 'hooks', entries: [{ key: 'hook', value: HOOK_SECRET, secret: true }] });
  configId = config.id;
  await h.worker({ outboundAllow: ['127.0.0.0/8'], defaultTimeoutMs: 5000 });
});
afterAll(async () => {
  await h.stopAll();
  await target.close();
  await new Promise<void>((r) => smtp.close(() => r()));
  await t.close();
});

/** An endpoint whose target redirects (a failure whose error quotes LOCATION), a job named `name` failing on it. */
async function failingJob(endpointName: string, name: string) {
  const endpoint = await t.service.registerEndpoint(t.actor, {
    name: endpointName,
    kind: 'HTTP',
    url: `${target.url}/redirects`,
    maxAttempts: 1,
  });
  const { job } = await t.service.createJob(t.actor, { endpointId: endpoint.id, kind: 'IMMEDIATE', name });
  expect((await settled(t, job.id)).status).toBe('FAILED');
  return { endpoint, job };
}

/** A webhook endpoint on `path` whose config holds HOOK_SECRET, as a chat hook's would. */
async function webhook(name: string, path: string) {
  return t.service.registerEndpoint(t.actor, { name, kind: 'HTTP', url: `${target.url}${path}`, configId, maxAttempts: 3 });
}

/** A mail's body as written (quoted-printable undone). */
const bodyOf = (data: string) =>
  data
    .split('\r\n\r\n')
    .slice(1)
    .join('\r\n\r\n')
    .replace(/=\r\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));

/**
 * Evaluates, and waits for the rule's notification to be delivered (webhook or email). `viaHandler`:
 * the pass is the registered `jobgate.alerts` handler's, with the options it was registered with
 * (the public address); else a bare evaluator pass, with none.
 */
async function delivered(ruleId: string, field: 'webhookDelivery' | 'emailDelivery', viaHandler = false) {
  if (viaHandler) await h.handlers.get('jobgate.alerts')!.fn(undefined, { workspaceId: t.actor.workspaceId } as unknown as HandlerContext);
  else await evaluateAlerts(t.database.pool, t.actor.workspaceId);
  return eventually(async () => {
    const alerts = await t.service.alerts(t.actor, { ruleId });
    const node = alerts.edges[0]?.node;
    return node && ['SUCCEEDED', 'FAILED'].includes(node[field]) && node;
  });
}

describe('notification formats with hostile values', () => {
  it('escapes every value of a Slack message: no ping, no disguised link, no template rendered', async () => {
    const { endpoint } = await failingJob('fmt.slack-source', SLACK_NAME);
    const sink = await webhook('fmt.slack', '/slack');
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'slack <!everyone> & co',
      condition: 'EXECUTION_FAILED',
      endpointIds: [endpoint.id],
      webhookEndpointId: sink.id,
      webhookFormat: 'SLACK',
    });
    const alert = await delivered(rule.id, 'webhookDelivery');
    // Before: the body's {{config.hook}} was rendered with the webhook endpoint's secret.
    expect(alert.webhookDelivery).toBe('SUCCEEDED');
    const text: string = JSON.parse(target.hitsOf('/slack').find((hit) => hit.body.includes(alert.id))!.body).text;
    // jobgate's own markup (the icon, the brackets) is there; Slack's control characters are not.
    expect(text.startsWith(':rotating_light: [jobgate] ')).toBe(true);
    expect(text).not.toMatch(/[<>]/);
    expect(text).not.toMatch(/&(?!amp;|lt;|gt;)/);
    expect(text).toContain('x &lt;!channel&gt; &lt;https://evil.example/phish|Click to re-authenticate&gt; &amp; ');
    expect(text).toContain('https://evil.example/&lt;!here&gt;?a=1&amp;b=&lt;@U123|boss&gt;');
    expect(text).toContain('rule "slack &lt;!everyone&gt; &amp; co"');
    // One line: a name cannot forge a second message line.
    expect(text).not.toMatch(/[\r\n]/);
    expect(text).toContain('{\u200b{config.hook}}');
    expect(text).not.toContain(HOOK_SECRET);
  });

  it('sends JSON values as data, with placeholders left unrendered and the delivery not broken by them', async () => {
    const name = 'json {{config.hook}} {{ config.missing }} {{input.text}} <b>&amp;</b>';
    const { endpoint, job } = await failingJob('fmt.json-source', name);
    const sink = await webhook('fmt.json', '/json');
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'json {{config.hook}}',
      condition: 'EXECUTION_FAILED',
      endpointIds: [endpoint.id],
      webhookEndpointId: sink.id,
    });
    const alert = await delivered(rule.id, 'webhookDelivery');
    // Before: {{config.missing}} failed the delivery ("the endpoint's config has no key").
    expect(alert.webhookDelivery).toBe('SUCCEEDED');
    const raw = target.hitsOf('/json').find((hit) => hit.body.includes(alert.id))!.body;
    expect(raw).not.toContain(HOOK_SECRET);
    const body = JSON.parse(raw);
    const shown = (s: string) => s.replace(/\u200b/g, '');
    expect(body.subject).toEqual({ type: 'JOB', id: job.id, name: expect.any(String) });
    expect(shown(body.subject.name)).toBe(name);
    expect(shown(body.rule.name)).toBe('json {{config.hook}}');
    // Markup is data in JSON: sent as it is, for the receiver to escape in its own output.
    expect(body.summary).toContain('<b>&amp;</b>');
    expect(body.detail.error).toContain(LOCATION);
  });

  it('emails a one-line subject and summary: a line break in a name forges no header and no line', async () => {
    const name = 'mail\r\nBcc: evil@evil.test\r\nRule: forged';
    const { endpoint } = await failingJob('fmt.mail-source', name);
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'mail\nX-Forged: yes',
      condition: 'EXECUTION_FAILED',
      endpointIds: [endpoint.id],
      email: true,
      emailTo: ['ops@test.local'],
    });
    const alert = await delivered(rule.id, 'emailDelivery');
    expect(alert.emailDelivery).toBe('SUCCEEDED');
    expect(alert.summary).not.toMatch(/[\r\n]/);
    const mail = mails.find((m) => m.data.includes(alert.id))!;
    expect(mail.to).toEqual(['ops@test.local']);
    const [head, ...rest] = mail.data.split('\r\n\r\n');
    // Header lines only (a folded header goes on with a space): none forged.
    expect(head!.split('\r\n').filter((l) => /^(bcc|x-forged|rule):/i.test(l))).toEqual([]);
    const body = rest
      .join('\r\n\r\n')
      .replace(/=\r\n/g, '')
      .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    expect(body.split(/\r?\n/).filter((l) => /^(Rule|Bcc|X-Forged):/.test(l))).toEqual(['Rule: mail X-Forged: yes']);
  });

  it('sends no email to a stored recipient that is not a plain address, and names none in the error', async () => {
    const { endpoint } = await failingJob('fmt.legacy-source', 'legacy recipients');
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'legacy recipients',
      condition: 'EXECUTION_FAILED',
      endpointIds: [endpoint.id],
      email: true,
      emailTo: ['ops@test.local'],
    });
    // As a rule written before addresses were checked holds them: two addresses in one string, a group.
    await t.query(`update alert_rules set email_to = $2 where id = $1`, [
      rule.id,
      ['ops@test.local, evil@evil.test', 'grp:evil2@evil.test;'],
    ]);
    const alert = await delivered(rule.id, 'emailDelivery');
    expect(alert.emailDelivery).toBe('FAILED');
    const { rows } = await t.query(`select last_error from executions where job_id = $1`, [alert.emailJobId]);
    expect(rows[0].last_error).toContain('2 recipient(s) are not plain email addresses');
    expect(rows[0].last_error).not.toMatch(/evil|ops@/);
    expect(mails.filter((m) => m.data.includes(alert.id))).toEqual([]);
  });

  it('emails the time since the condition was first seen and, with a public address set, a link to the alert in the console', async () => {
    const { endpoint } = await failingJob('fmt.link-source', 'linked');
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'linked',
      condition: 'EXECUTION_FAILED',
      endpointIds: [endpoint.id],
      email: true,
      emailTo: ['ops@test.local'],
      webhookEndpointId: (await webhook('fmt.link-json', '/json')).id,
    });
    const alert = await delivered(rule.id, 'emailDelivery', true);
    expect(alert.emailDelivery).toBe('SUCCEEDED');
    const body = bodyOf(mails.find((m) => m.data.includes(alert.id))!.data);
    expect(body).toMatch(/^Elapsed since first seen: \d+ s$/m);
    expect(body).toContain(`Open it in the console: https://jobs.example.test/console/alerts/${alert.id}`);
    // The JSON webhook carries both as fields.
    await eventually(async () => target.hitsOf('/json').some((hit) => hit.body.includes(alert.id)));
    const json = JSON.parse(target.hitsOf('/json').find((hit) => hit.body.includes(alert.id))!.body);
    expect(json.consoleUrl).toBe(`https://jobs.example.test/console/alerts/${alert.id}`);
    expect(typeof json.elapsedMs).toBe('number');
  });

  it('links nothing when no public address is set; the elapsed time is there still', async () => {
    const { endpoint } = await failingJob('fmt.nolink-source', 'unlinked');
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'unlinked',
      condition: 'EXECUTION_FAILED',
      endpointIds: [endpoint.id],
      email: true,
      emailTo: ['ops@test.local'],
    });
    const alert = await delivered(rule.id, 'emailDelivery');
    const body = bodyOf(mails.find((m) => m.data.includes(alert.id))!.data);
    expect(body).toMatch(/^Elapsed since first seen: /m);
    expect(body).not.toContain('console');
  });

  it('takes the public address from JOBGATE_PUBLIC_URL (trailing slashes dropped), refusing one that is not an http(s) URL', () => {
    const base = { DATABASE_URL: 'postgres://x@127.0.0.1/db', JOBGATE_LOG_LEVEL: 'silent' };
    expect(parseConfig({ ...base, JOBGATE_PUBLIC_URL: 'https://jobs.example.test/gate//' }).alerts.publicUrl).toBe(
      'https://jobs.example.test/gate',
    );
    expect(parseConfig(base).alerts.publicUrl).toBeUndefined();
    expect(() => parseConfig({ ...base, JOBGATE_PUBLIC_URL: 'javascript:alert(1)' })).toThrow(/JOBGATE_PUBLIC_URL/);
  });
});
