/**
 * Comments that name a file of the repository must name one that exists: after a file moves or is
 * renamed, the comments that still point at its old path fail `npm run check`.
 *
 *   check    every comment of src/, test/, bench/ and scripts/ (part of `npm run check`)
 *
 * What counts as naming a file, in a comment (line or block) of a .ts, .tsx, .mts, .js or .mjs file:
 *  - a path with a folder, ending in one of the repository's file extensions (.ts .tsx .mts .js .mjs
 *    .cjs .sql .json .md .graphql): `src/db/pool.ts`, `./schema.ts`, `../src/db/listener.ts`;
 *  - a bare name of a source file or a migration, written as files here are (lowercase, kebab-case):
 *    `migrations.ts`, `000001_foundation.sql` (a bare .json or .md name, or a capitalised one such as
 *    Node.js, is not taken for a file: those name files at run time and products, not this tree);
 *  - a folder path from one of the repository's top folders: `src/db/statements`, `test/support`.
 *
 * Where it is looked for: a path starting with `./` or `../` from the comment's folder only; any
 * other path from the comment's folder or any folder above it, up to the repository root (so a bare
 * name names a file beside the comment's, `src/db/pool.ts` a path from the root), and a bare .sql
 * name in migrations/. A `.js` or `.mjs` name also matches its `.ts` or `.mts` source, as imports
 * write it.
 *
 * Not counted: what is preceded by `/`, `:`, `@` or `.` (URLs, `owner/repo:path` references to
 * other projects, npm package paths), paths under `dist/` or `node_modules/` (built or installed,
 * not in the repository), and text in strings (only comments are read).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The folders whose comments are checked. */
export const CHECKED_FOLDERS = ['src', 'test', 'bench', 'scripts'];

const SOURCE = /\.(ts|tsx|mts|js|mjs|cjs)$/;
const EXT = '(?:ts|tsx|mts|js|mjs|cjs|sql|json|md|graphql)';
/** A file name with an extension after at least one folder, `./` or `../`. */
const FILE_PATH = new RegExp(`(?<![\\w@:/.\\-])((?:(?:\\.{1,2}/)+(?:[\\w-]+/)*|(?:[\\w-]+/)+)[\\w-][\\w.-]*\\.${EXT})(?![\\w/-])`, 'g');
/** A bare source file or migration name, lowercase as the tree's file names are. */
const BARE_NAME = /(?<![\w@:/.-])([a-z0-9][a-z0-9_.-]*\.(?:ts|tsx|mts|js|mjs|cjs|sql))(?![\w/-])/g;
/** A folder path from a top folder of the repository. */
const FOLDER_PATH = /(?<![\w@:/.-])((?:src|test|bench|scripts|migrations)(?:\/[\w-]+)+)\/?(?![\w/-]|\.\w)/g;

export interface StaleReference {
  /** The file holding the comment, relative to the root. */
  file: string;
  line: number;
  /** The path as the comment writes it. */
  reference: string;
}

/** The comments of a source file, as [start, end) offsets. */
export function commentRanges(fileName: string, text: string): ts.CommentRange[] {
  const kind = /\.tsx$/.test(fileName) ? ts.ScriptKind.TSX : /\.(js|mjs|cjs)$/.test(fileName) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, kind);
  const found = new Map<number, ts.CommentRange>();
  const add = (ranges: ts.CommentRange[] | undefined) => {
    for (const r of ranges ?? []) found.set(r.pos, r);
  };
  // Every token's trivia: a comment before a closing brace belongs to no node but to the brace.
  const visit = (node: ts.Node) => {
    add(ts.getLeadingCommentRanges(text, node.getFullStart()));
    add(ts.getTrailingCommentRanges(text, node.getEnd()));
    for (const child of node.getChildren(source)) visit(child);
  };
  visit(source);
  return [...found.values()].sort((a, b) => a.pos - b.pos);
}

/** The file paths a comment's text names (see the header for what counts). */
export function referencesIn(comment: string): string[] {
  const out = [...comment.matchAll(FILE_PATH)].map((m) => m[1]!);
  for (const m of comment.matchAll(BARE_NAME)) out.push(m[1]!);
  for (const m of comment.matchAll(FOLDER_PATH)) out.push(m[1]!);
  return out.filter((r) => !r.startsWith('dist/') && !r.includes('node_modules'));
}

function exists(root: string, relative: string): boolean {
  const candidates = [relative];
  if (relative.endsWith('.js')) candidates.push(relative.slice(0, -3) + '.ts', relative.slice(0, -3) + '.tsx');
  if (relative.endsWith('.mjs')) candidates.push(relative.slice(0, -4) + '.mts');
  return candidates.some((c) => !path.relative(root, path.resolve(root, c)).startsWith('..') && fs.existsSync(path.resolve(root, c)));
}

/** Whether `reference`, written in a comment of `file` (relative to `root`), names a file or folder that exists. */
export function resolves(root: string, file: string, reference: string): boolean {
  const dir = path.dirname(file);
  if (reference.startsWith('./') || reference.startsWith('../')) return exists(root, path.join(dir, reference));
  if (!reference.includes('/') && reference.endsWith('.sql') && exists(root, path.join('migrations', reference))) return true;
  for (let d = dir; ; d = path.dirname(d)) {
    if (exists(root, path.join(d, reference))) return true;
    if (d === '.' || d === '/' || d === '') return false;
  }
}

function sourcesUnder(root: string, folder: string): string[] {
  const full = path.join(root, folder);
  if (!fs.existsSync(full)) return [];
  return fs.readdirSync(full, { withFileTypes: true }).flatMap((entry) => {
    const relative = path.join(folder, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourcesUnder(root, relative);
    return SOURCE.test(entry.name) && !entry.name.endsWith('.d.ts') ? [relative] : [];
  });
}

/** Every comment naming a file that does not exist, in the checked folders under `root`. */
export function staleReferences(root: string = ROOT, folders: string[] = CHECKED_FOLDERS): StaleReference[] {
  const stale: StaleReference[] = [];
  for (const file of folders.flatMap((f) => sourcesUnder(root, f)).sort()) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    for (const range of commentRanges(file, text)) {
      const comment = text.slice(range.pos, range.end);
      for (const reference of referencesIn(comment)) {
        if (resolves(root, file, reference)) continue;
        const line = text.slice(0, range.pos + comment.indexOf(reference)).split('\n').length;
        stale.push({ file, line, reference });
      }
    }
  }
  return stale;
}

function main(command: string | undefined): number {
  if (command !== 'check') {
    console.error('usage: tsx scripts/comment-paths.ts check');
    return 2;
  }
  const stale = staleReferences();
  for (const s of stale) console.error(`${s.file}:${s.line}: the comment names ${s.reference}, which does not exist`);
  if (stale.length) {
    console.error(`comment paths: ${stale.length} comment(s) name a file that does not exist: point them at the file's current path`);
    return 1;
  }
  console.log('comment paths: every file a comment names exists');
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exit(main(process.argv[2]));
