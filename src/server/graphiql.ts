/**
 * GraphiQL at /graphql, from the local build of @graphql-yoga/render-graphiql (no CDN: it must
 * render on machines without internet), loaded on its first request and rendered once.
 *
 * The key a person types into the Headers panel stays in that page's memory: yoga's GraphiQL
 * persists headers by default (`graphiql:headers`, and each tab's headers in `graphiql:tabState`,
 * in localStorage: a bearer key on disk across browser restarts, readable by any script of the
 * origin). With `shouldPersistHeaders: false` GraphiQL writes neither, hides the setting that
 * would turn it back on, and ignores one a browser kept from before; the console, likewise, keeps
 * its key in sessionStorage only.
 *
 * What a person types into the editors is kept nowhere either: a mutation's secret (a config
 * value, a signing secret) written into the operation or the variables was saved to localStorage
 * (`graphiql:query`, `graphiql:variables`, each tab's state), readable after a browser restart and
 * by any script of the origin, and written into the address bar (`?query=`), from which it went
 * into the history and, on a reload, into the request line and any proxy's log. GraphiQL keeps
 * nothing with `storage: null`; the page's address is kept to its path by a first script, since
 * yoga's page writes the operation into it on every edit and takes no option against that. A
 * `?query=` link still opens with its operation, as it did.
 *
 * The page carries a Content-Security-Policy like the console's (./console.ts). It is one inline
 * script (GraphiQL and its editor's workers, started from blob: URLs) and one inline style sheet;
 * the script is allowed by its SHA-256, computed here from the page as rendered, and nothing else
 * may run. Styles may be inline: the editor (Monaco) adds style elements as it goes, which no
 * hash can foresee, and a style cannot run code.
 */
import { createHash } from 'node:crypto';
import type { GraphiQLOptions, Plugin } from 'graphql-yoga';

export interface GraphiQLPage {
  render(options: GraphiQLOptions): Promise<string>;
  /** Gives GraphiQL's page its Content-Security-Policy and the console's other headers. */
  plugin: Plugin;
}

const scriptHashes = (html: string) =>
  [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => `'sha256-${createHash('sha256').update(m[1]!).digest('base64')}'`);

export function graphiqlCsp(html: string): string {
  return [
    "default-src 'none'",
    `script-src ${scriptHashes(html).join(' ')}`,
    'worker-src blob:',
    "style-src 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join('; ');
}

/** Runs before GraphiQL: every address it writes is kept to the page's path (no `?query=`). */
const KEEP_ADDRESS_TO_PATH =
  'const replaceState = history.replaceState.bind(history); ' +
  'history.replaceState = (state, unused) => replaceState(state, unused, location.pathname);';

/**
 * The page is a 9 MB module whose source and inlined script V8 keeps as strings (about 27 MB of
 * heap in a heap snapshot of a loaded gateway): a gateway that never serves GraphiQL, such as one
 * behind a load balancer serving live subscriptions, should not carry it. Its options are the
 * gateway's, the same for every request, so it is rendered (and hashed) once.
 */
export function createGraphiQLPage(): GraphiQLPage {
  let page: Promise<string> | undefined;
  let csp: string | undefined;
  const build = async (options: GraphiQLOptions) => {
    const rendered = (await import('@graphql-yoga/render-graphiql')).renderGraphiQL({
      ...options,
      shouldPersistHeaders: false,
      // GraphiQL's own prop, passed through by yoga's page: no storage at all.
      ...({ storage: null } as object),
    });
    const html = rendered.replace('<script>', `<script>${KEEP_ADDRESS_TO_PATH}</script><script>`);
    csp = graphiqlCsp(html);
    return html;
  };
  return {
    render: (options) =>
      (page ??= build(options).catch((error: unknown) => {
        page = undefined;
        throw error;
      })),
    plugin: {
      onResponse({ response }) {
        if (!csp || !response.headers.get('content-type')?.startsWith('text/html')) return;
        response.headers.set('content-security-policy', csp);
        response.headers.set('referrer-policy', 'no-referrer');
        response.headers.set('cross-origin-opener-policy', 'same-origin');
      },
    },
  };
}
