/**
 * The code blocks and links of the documentation (README.md and docs/), for the tests that run
 * them (./examples.test.ts). A fenced block's info string says what it is and how it is tested:
 *
 *   ```graphql                   validated against the schema, each operation on its own
 *   ```graphql quickstart        also run, in order, against a real gateway, each effect checked
 *   ```sh quickstart             run in order in one bash session against a real gateway
 *   ```sh quickstart background  started beside the others (a stream), its output checked
 *   ```ts                        type-checked against the built package (names it does not
 *                                declare, the application's, taken as `any`)
 *   ```ts runnable               also a whole program, run with the package built
 *
 * docs/schema-reference.md is generated (scripts/schema-reference.ts) and not read here.
 */
import fs from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');

export interface Block {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  tags: string[];
  code: string;
}

/** README.md and every docs/*.md but the generated reference, relative to the root. */
export function documentationFiles(): string[] {
  const docs = fs
    .readdirSync(path.join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.md') && f !== 'schema-reference.md')
    .map((f) => path.join('docs', f));
  return ['README.md', ...docs.sort()];
}

export function blocksOf(file: string): Block[] {
  const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S+)?(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i]!.startsWith('```'); i++) body.push(lines[i]!);
    blocks.push({ file, line: start + 1, lang: open[1] ?? '', tags: open[2]!.trim().split(/\s+/).filter(Boolean), code: body.join('\n') });
  }
  return blocks;
}

export const allBlocks = () => documentationFiles().flatMap(blocksOf);

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces as hyphens. */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a markdown file offers: its headings' (outside code blocks) and explicit `<a id>`s. */
export function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (heading) anchors.add(anchorOf(heading[1]!));
    for (const m of line.matchAll(/<a id="([^"]+)">/g)) anchors.add(m[1]!);
  }
  return anchors;
}

/** The relative links of a markdown file (outside code blocks): `[text](target)` with no scheme. */
export function linksOf(file: string): { target: string; line: number }[] {
  const links: { target: string; line: number }[] = [];
  let fenced = false;
  fs.readFileSync(path.join(ROOT, file), 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (line.startsWith('```')) fenced = !fenced;
      if (fenced) return;
      for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (!/^[a-z]+:/i.test(m[1]!)) links.push({ target: m[1]!, line: i + 1 });
      }
    });
  return links;
}
