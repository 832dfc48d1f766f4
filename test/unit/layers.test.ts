/**
 * The import graph keeps its layers: every import points to the importer's own layer or one below it, never back
 * up, and no chain of imports comes back to where it started, from file to file or from folder to folder (src/api,
 * bench/bin, dev: each file collapsed to its folder). Type-only imports count: a circle of types is still two modules
 * that cannot be read apart. The contracts and the workflows stay sandbox-safe: only the SDK's
 * workflow-side packages and each other (the workflows may import the activities' types, which the compiler erases).
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Bottom first. A file belongs to the first layer one of whose prefixes its path starts with. */
const LAYERS: readonly (readonly string[])[] = [
  ['src/contracts/'],
  ['src/workflows/'],
  [
    'src/errors.ts',
    'src/node-version.ts',
    'src/config.ts',
    'src/config-schema.ts',
    'src/dev-stack.ts',
    'src/temporal-connection.ts',
    'src/doors.ts',
    'src/db/',
    'src/delivery/',
    'src/crypto/',
    'src/codec/',
    'src/observability/',
  ],
  ['src/ledger/'],
  ['src/sql/fragments.ts'],
  ['src/sql/'],
  ['src/activities/'],
  ['src/schedules.ts', 'src/workers/', 'src/operations/', 'src/api/', 'src/processor/'],
  ['src/bin/'],
  ['dev/'],
  ['bench/'],
  ['test/'],
];

/** What a sandboxed file (workflow bundle) may import from outside the repository. */
const SANDBOX_PACKAGES = ['@temporalio/workflow', '@temporalio/common'];

interface Import {
  from: string;
  to: string;
  typeOnly: boolean;
}

/** The SDK idiom: a workflow names its activities by type only; nothing of them reaches the bundle. */
const sdkIdiom = (i: Import) => i.typeOnly && i.from.startsWith('src/workflows/') && i.to.startsWith('src/activities/');

function layerOf(file: string): number {
  const index = LAYERS.findIndex((prefixes) => prefixes.some((prefix) => file.startsWith(prefix)));
  if (index < 0) throw new Error(`${file} is in no layer: add its folder to LAYERS`);
  return index;
}

function sourceFiles(dir: string): string[] {
  return fs
    .readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.join(dir, f));
}

const IMPORT = /^\s*(import|export)\s+(type\s+)?(?:[^'";]*?\s+from\s+)?'([^']+)'/gm;
const DYNAMIC_IMPORT = /\bimport\(\s*'([^']+)'\s*\)/g;

function importsOf(file: string): Import[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  const specs = [
    ...[...text.matchAll(IMPORT)].map((m) => ({ spec: m[3]!, typeOnly: m[2] !== undefined })),
    ...[...text.matchAll(DYNAMIC_IMPORT)].map((m) => ({ spec: m[1]!, typeOnly: false })),
  ];
  return specs.map(({ spec, typeOnly }) => ({
    from: file,
    to: spec.startsWith('.') ? path.normalize(path.join(path.dirname(file), spec)).replace(/\.js$/, '.ts') : spec,
    typeOnly,
  }));
}

const files = ['src', 'dev', 'bench', 'test'].flatMap(sourceFiles);
const imports = files.flatMap(importsOf);
const local = imports.filter((i) => !path.isAbsolute(i.to) && /^(src|dev|bench|test)\//.test(i.to));

/** Every circle of imports among `edges`, each as the chain that closes it (Tarjan's strongly connected components). */
function circlesOf(edges: readonly Import[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const circles: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (stack.includes(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component = stack.splice(stack.indexOf(v));
    if (component.length > 1) circles.push(component.sort());
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return circles;
}

describe('import layers', () => {
  it('finds the imports it checks (the parser is not blind)', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(
      local.some((i) => i.from === 'src/workflows/sweep-expired-holds.ts' && i.to === 'src/contracts/starts.ts'),
    ).toBe(true);
    expect(
      local.some(
        (i) => i.from === 'src/workflows/sweep-expired-holds.ts' && i.to === 'src/activities/index.ts' && i.typeOnly,
      ),
    ).toBe(true);
  });

  it('no import runs back up a layer', () => {
    const upward = local
      .filter((i) => layerOf(i.to) > layerOf(i.from) && !sdkIdiom(i))
      .map((i) => `${i.from} -> ${i.to}`);
    expect(upward).toEqual([]);
  });

  it('no circle of files or of folders (and the check finds each planted)', () => {
    // The SDK idiom is the one import a folder may make back: the compiler erases it, the workflows run without it.
    const folders = (edges: readonly Import[]) =>
      edges.filter((i) => !sdkIdiom(i)).map((i) => ({ ...i, from: path.dirname(i.from), to: path.dirname(i.to) }));
    expect(circlesOf(local)).toEqual([]);
    expect(circlesOf(folders(local))).toEqual([]);
    const planted = { from: 'src/contracts/ids.ts', to: 'src/workflows/sweep-expired-holds.ts', typeOnly: true };
    expect(circlesOf([...local, planted])).toEqual([
      expect.arrayContaining(['src/contracts/ids.ts', 'src/workflows/sweep-expired-holds.ts']),
    ]);
    // To a file that imports nothing: no circle of files, but its folder imports the importer's.
    const between = { from: 'src/contracts/ids.ts', to: 'src/workflows/history-budget.ts', typeOnly: true };
    expect(circlesOf([...local, between])).toEqual([]);
    expect(circlesOf(folders([...local, between]))).toEqual([['src/contracts', 'src/workflows']]);
  });

  it('contracts and workflows import only each other and the workflow-side SDK (sandbox-safe)', () => {
    const sandboxed = imports.filter((i) => i.from.startsWith('src/contracts/') || i.from.startsWith('src/workflows/'));
    const outside = sandboxed
      .filter((i) => !i.to.startsWith('src/contracts/') && !i.to.startsWith('src/workflows/'))
      .filter((i) => !SANDBOX_PACKAGES.includes(i.to) && !sdkIdiom(i))
      .map((i) => `${i.from} -> ${i.to}`);
    expect(outside).toEqual([]);
    // Contracts are the bottom: they import no workflow either.
    expect(sandboxed.filter((i) => i.from.startsWith('src/contracts/') && i.to.startsWith('src/workflows/'))).toEqual(
      [],
    );
  });

  it('the hold rulebook is pure: it imports only the contracts (no database, no clock, no Temporal)', () => {
    const rulebook = imports.filter((i) => i.from.startsWith('src/ledger/'));
    expect(rulebook.length).toBeGreaterThan(0);
    expect(rulebook.filter((i) => !i.to.startsWith('src/contracts/')).map((i) => `${i.from} -> ${i.to}`)).toEqual([]);
  });

  it('the product never imports the local stack, the benchmark or the tests', () => {
    const leaks = local
      .filter((i) => i.from.startsWith('src/') && !i.to.startsWith('src/'))
      .map((i) => `${i.from} -> ${i.to}`);
    expect(leaks).toEqual([]);
  });
});
