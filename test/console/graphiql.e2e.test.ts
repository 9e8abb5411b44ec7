/**
 * GraphiQL at /graphql in a real browser (Debian's Chromium, headless, through playwright-core):
 * a key typed into its Headers panel is used, and kept nowhere the browser keeps things
 * (localStorage, sessionStorage), before or after a reload; the page runs under its
 * Content-Security-Policy without a single violation.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { createLogger } from '../../src/log.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { launchChromium, screenshot } from '../support/console.js';

let t: TestDb;
let gw: RunningGateway;
let browser: Browser;
let key: string;

beforeAll(async () => {
  t = await createTestDb();
  gw = await startGateway({
    service: t.service,
    log: createLogger('silent'),
    host: '127.0.0.1',
    port: 0,
    console: false,
    authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
  });
  browser = await launchChromium();
  key = (await t.service.bootstrapKey('default', 'VIEWER', 'graphiql e2e')).key;
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await gw?.close();
  await t?.close();
});

/** Every entry of both storages of the page's origin. */
const storages = (page: Page) =>
  page.evaluate(() => {
    const all = (s: Storage) => Object.fromEntries(Array.from({ length: s.length }, (_, i) => [s.key(i)!, s.getItem(s.key(i)!)]));
    return { local: all(localStorage), session: all(sessionStorage) };
  });

describe('GraphiQL', () => {
  it('uses a key typed into its Headers panel and keeps it in no storage, before or after a reload, under its CSP', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    onTestFailed(async () => void (await screenshot(page, 'graphiql-headers-failed').catch(() => {})));
    const violations: string[] = [];
    page.on('console', (m) => /Content Security Policy|Refused to/.test(m.text()) && violations.push(m.text()));
    page.on('pageerror', (e) => violations.push(`page error: ${e.message}`));
    try {
      await page.goto(gw.url);
      await page.getByRole('button', { name: 'Headers', exact: true }).click();
      await page.locator('.monaco-editor[data-uri$="headers.json"]').click();
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.insertText(JSON.stringify({ Authorization: `Bearer ${key}` }));
      await page.locator('.monaco-editor[data-uri$="operation.graphql"], .monaco-editor[data-uri$=".graphql"]').first().click();
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.insertText('query Slug { workspace { slug } }');
      await page.getByRole('button', { name: 'Variables', exact: true }).click();
      await page.locator('.monaco-editor[data-uri$="variables.json"]').click();
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.insertText('{ "signingSecret": "typed-variable-s3cret" }');
      // GraphiQL reads the operation's name from the editor after a debounce; executing before it
      // has runs the page's first document's name ("Cannot infer operation"): sent again until it has.
      const answer = page.locator('.graphiql-response');
      for (let i = 0; i < 50 && !(await answer.getByText('"default"').count()); i++) {
        await page.getByRole('button', { name: /^Execute query/ }).click();
        await page.waitForTimeout(100);
      }
      // The answer came with the key: the workspace's slug, not UNAUTHENTICATED.
      await answer.getByText('"default"').waitFor();

      const secret = key.slice('jg_'.length);
      const before = await storages(page);
      // Neither the key, nor what was typed into the operation and variables (a mutation's secrets).
      expect(before.local, 'GraphiQL keeps nothing in localStorage').toEqual({});
      expect(JSON.stringify(before)).not.toContain(secret);
      expect(JSON.stringify(before)).not.toContain('typed-variable-s3cret');
      // Nor in the address bar, from which it would go into the history and the request line.
      expect(new URL(page.url()).search).toBe('');

      await page.reload();
      await page.getByRole('button', { name: 'Headers', exact: true }).click();
      await page.locator('.monaco-editor[data-uri$="headers.json"]').waitFor();
      const after = await storages(page);
      expect(JSON.stringify(after)).not.toContain(secret);
      expect(await page.locator('.monaco-editor[data-uri$="headers.json"]').innerText()).not.toContain(secret);
      expect(violations).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
