/**
 * Nothing is exported that no other module imports: each export of a module in src/, dev/ or bench/ is imported by
 * another module (the tests and the root config files count), or its module is an entry point something loads by path
 * (ENTRIES); otherwise it is dead code, or a name its own file uses and should not export. Read with the compiler:
 * an import resolves, through any re-exports, to the module that declares what it names; of `import * as X`, what is
 * read of X counts (all of it, when X itself is passed on); `import('...')` uses everything the module exports.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Modules loaded by path, not by an import: everything one exports counts as used. Keep it short. */
const ENTRIES: readonly (readonly [RegExp, string])[] = [
  [/^(src|dev|bench)\/bin\//, 'scripts: package.json, compose and the tests run them with node or tsx'],
  [/^src\/workflows\/index\.ts$/, 'the workflow bundle (workflowsPath): the worker registers each workflow it exports'],
  [/^src\/workflows\/interceptors\.ts$/, 'workflowInterceptorModules: the SDK calls its `interceptors`'],
  [/^bench\/workflows\.ts$/, "the benchmark's workflow bundle (workflowsPath)"],
];

const isEntry = (file: string) => ENTRIES.some(([pattern]) => pattern.test(file));

/**
 * A program over `files` that reads only them: an import of a package stays unresolved, which costs the parse of
 * every declaration in node_modules and changes nothing here (only our own modules' exports are checked).
 */
function programOf(files: readonly string[]): ts.Program {
  return ts.createProgram(files, { module: ts.ModuleKind.NodeNext, noResolve: true, types: [], noEmit: true });
}

/** `<file> <name>` for every export `program` declares in src/, dev/ or bench/, and those no other module imports. */
function exportsOf(program: ts.Program, root: string, entry: (file: string) => boolean) {
  const checker = program.getTypeChecker();
  const files = program
    .getSourceFiles()
    .filter((f) => !f.isDeclarationFile)
    .map((f) => ({ source: f, name: path.relative(root, f.fileName) }))
    .filter(({ name }) => !name.startsWith('..') && !name.includes('node_modules'));
  const exported = (module: ts.Node) => {
    const symbol = checker.getSymbolAtLocation(module);
    return symbol ? checker.getExportsOfModule(symbol) : [];
  };
  const used = new Set<ts.Symbol>();
  /** Marks a symbol used, and each re-export and import it passes through on its way to its declaration. */
  const use = (symbol: ts.Symbol | undefined): void => {
    if (!symbol || used.has(symbol)) return;
    used.add(symbol);
    if (symbol.flags & ts.SymbolFlags.Alias) use(checker.getImmediateAliasedSymbol(symbol));
  };
  /** Marks what `module` exports used: everything, or only `name`. */
  const useOf = (module: ts.Node, name?: string) =>
    exported(module).forEach((s) => (name === undefined || s.name === name) && use(s));
  /** This file's `import * as X`: X's module, by X. `X.name` uses that export; X any other way, all of them. */
  let spaces = new Map<string, ts.Expression>();
  const visit = (node: ts.Node): void => {
    const { parent } = node;
    if (ts.isImportDeclaration(node)) {
      const bindings = node.importClause?.namedBindings;
      if (node.importClause?.name) use(checker.getSymbolAtLocation(node.importClause.name));
      if (bindings && ts.isNamespaceImport(bindings)) spaces.set(bindings.name.text, node.moduleSpecifier);
      else bindings?.elements.forEach((e) => use(checker.getSymbolAtLocation(e.name)));
      return;
    } else if (ts.isIdentifier(node) && spaces.has(node.text)) {
      const declaration = checker.getSymbolAtLocation(node)?.declarations?.[0];
      const member = ts.isPropertyAccessExpression(parent)
        ? parent.name
        : ts.isQualifiedName(parent)
          ? parent.right
          : undefined;
      if (declaration && ts.isNamespaceImport(declaration)) useOf(spaces.get(node.text)!, member?.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      if (node.arguments[0]) useOf(node.arguments[0]);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      useOf(node.argument.literal);
    }
    // `export ... from` adds no use: it passes on those of the modules that import through it.
    ts.forEachChild(node, visit);
  };
  for (const { source, name } of files) {
    spaces = new Map();
    visit(source);
    if (entry(name)) useOf(source);
  }
  const all: string[] = [];
  const dead: string[] = [];
  for (const { source, name } of files.filter((f) => /^(src|dev|bench)\//.test(f.name) && !entry(f.name))) {
    for (const symbol of exported(source)) {
      // An `export *` lists what another module declares: that module answers for it.
      if (!symbol.declarations?.some((d) => d.getSourceFile() === source)) continue;
      all.push(`${name} ${symbol.name}`);
      if (!used.has(symbol)) dead.push(`${name} ${symbol.name}`);
    }
  }
  return { all, dead };
}

describe('dead exports', () => {
  it('no module exports what no other module imports', { timeout: 60_000 }, () => {
    const config = ts.readConfigFile(path.join(ROOT, 'tsconfig.json'), (file) => fs.readFileSync(file, 'utf8'));
    const { fileNames } = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
    const { all, dead } = exportsOf(programOf(fileNames), ROOT, isEntry);
    // Not blind: it read the exports; `holdLabels` is imported, `noopHold` only re-exported by an entry point.
    expect(all.length).toBeGreaterThan(700);
    expect(all).toEqual(
      expect.arrayContaining(['src/contracts/story.ts holdLabels', 'bench/bare-fan-out.ts noopHold']),
    );
    expect(dead).toEqual([]);
  });

  it('finds a planted dead export, and counts each way of importing one', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dead-exports-'));
    // Named from src/ of `dir` (`use.ts` is the importer), so that this file names no path of the repository.
    const sources: Record<string, string> = {
      'a.ts': 'export const named = 1, unused = 2;\nexport function local() { return named; }\nlocal();',
      'b.ts': "export * from './a.js';\nexport { unused as renamed } from './a.js';\nexport type T = number;",
      'c.ts': 'export const viaNamespace = 1, besideIt = 2;',
      'd.ts': 'export const viaDynamic = 1;',
      'e.ts': 'export const viaType = 1;',
      'bin/run.ts': "export { local } from '../a.js';",
      'use.ts': [
        "import { named, type T } from './b.js';",
        "import * as c from './c.js';",
        "type E = typeof import('./e.js');",
        "void import('./d.js');",
        'const all: [number, T, number, E] = [named, 1, c.viaNamespace, { viaType: 1 }];',
        'void all;',
      ].join('\n'),
    };
    try {
      for (const [file, text] of Object.entries(sources)) {
        fs.mkdirSync(path.dirname(path.join(dir, 'src', file)), { recursive: true });
        fs.writeFileSync(path.join(dir, 'src', file), text);
      }
      const program = programOf(Object.keys(sources).map((f) => path.join(dir, 'src', f)));
      const { all, dead } = exportsOf(program, dir, (file) => file.startsWith('src/bin/'));
      const declared = 'a.ts local|a.ts named|a.ts unused|b.ts T|b.ts renamed|c.ts besideIt|c.ts viaNamespace';
      expect(all.sort()).toEqual([...declared.split('|'), 'd.ts viaDynamic', 'e.ts viaType'].map((e) => `src/${e}`));
      // `unused` is re-exported under another name, which nothing imports; `local` is used by an entry point; of a
      // namespace, what is read of it.
      expect(dead.sort()).toEqual(['a.ts unused', 'b.ts renamed', 'c.ts besideIt'].map((e) => `src/${e}`));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
