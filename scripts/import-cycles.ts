/**
 * No import cycles in src/: `npm run check` runs `check`, which fails on any.
 *
 * A cycle, even one of type-only imports, means two modules cannot be read, tested or moved one
 * without the other, and a value cycle can leave a binding undefined at load time depending on
 * which module is imported first. Every import counts: `import`, `import type`, `export ... from`
 * and `import()` with a literal specifier, resolved as TypeScript resolves them (NodeNext: a `.js`
 * specifier names the `.ts` file). Only files under src/ are followed; packages are leaves.
 *
 * Cycles are found as strongly connected components of the import graph (Tarjan's algorithm),
 * and each is printed as one concrete loop through it, so the message says which imports to cut.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The import graph of the TypeScript files under `dir`: file → files it imports (absolute paths). */
export function importGraph(dir: string, tsconfig = path.join(ROOT, 'tsconfig.json')): Map<string, Set<string>> {
  const config = ts.getParsedCommandLineOfConfigFile(tsconfig, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  if (!config) throw new Error(`cannot read ${tsconfig}`);
  const files = ts.sys.readDirectory(dir, ['.ts'], undefined, undefined).filter((f) => !f.endsWith('.d.ts'));
  const inside = (file: string) => file.startsWith(dir + path.sep) && !file.endsWith('.d.ts');
  const graph = new Map<string, Set<string>>();
  for (const file of files) {
    const edges = new Set<string>();
    const info = ts.preProcessFile(ts.sys.readFile(file) ?? '', true, true);
    for (const ref of info.importedFiles) {
      const resolved = ts.resolveModuleName(ref.fileName, file, config.options, ts.sys).resolvedModule?.resolvedFileName;
      if (resolved && inside(path.resolve(resolved))) edges.add(path.resolve(resolved));
    }
    graph.set(path.resolve(file), edges);
  }
  return graph;
}

/** The graph's cycles: each as a loop of files, the first file repeated at the end. */
export function findCycles(graph: Map<string, Set<string>>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const lowlinks = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const connect = (v: string) => {
    indices.set(v, index);
    lowlinks.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!indices.has(w)) {
        connect(w);
        lowlinks.set(v, Math.min(lowlinks.get(v)!, lowlinks.get(w)!));
      } else if (onStack.has(w)) lowlinks.set(v, Math.min(lowlinks.get(v)!, indices.get(w)!));
    }
    if (lowlinks.get(v) === indices.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.get(v)?.has(v)) components.push(component);
    }
  };
  for (const v of [...graph.keys()].sort()) if (!indices.has(v)) connect(v);
  return components.map((component) => loopThrough(graph, new Set(component)));
}

/** One loop inside a strongly connected component: from its first file (sorted) back to it, breadth first. */
function loopThrough(graph: Map<string, Set<string>>, component: Set<string>): string[] {
  const start = [...component].sort()[0]!;
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of [...(graph.get(v) ?? [])].sort()) {
      if (!component.has(w)) continue;
      if (w === start) {
        const loop = [start];
        for (let at: string | undefined = v; at !== undefined && at !== start; at = cameFrom.get(at)) loop.splice(1, 0, at);
        return [...loop, start];
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [command = 'check'] = process.argv.slice(2);
  if (command !== 'check') {
    console.error('usage: tsx scripts/import-cycles.ts check');
    process.exit(2);
  }
  const cycles = findCycles(importGraph(path.join(ROOT, 'src')));
  if (cycles.length === 0) {
    console.log('import cycles: none in src/');
  } else {
    const shown = (file: string) => path.relative(ROOT, file);
    console.error(`import cycles: ${cycles.length} in src/ (each import below leads to the next; cut one):`);
    for (const loop of cycles) console.error(`  ${loop.map(shown).join('\n    -> ')}`);
    process.exit(1);
  }
}
