/**
 * The replay gate's reading of the workflow bundle: every module of ours the bundler packs (bundleWorkflows'
 * entries and what they import or require, whatever the extension), read with TypeScript's type checker, so a call is
 * known by what it resolves to, not by how it is spelt (an import renamed, a namespace, a re-binding, a wrapper in
 * another module). Every call that resolves to an export of @temporalio/workflow is classified; one the gate does not
 * know, and a call through `any`, is a problem, never skipped. `gateProblems` holds the reading to
 * test/support/waiting-points.ts.
 */
import path from 'node:path';
import ts from 'typescript';
import { FAILURE_CONVERTER_PATH } from '../../src/codec/encryption-codec.js';
import * as worker from '../../src/workers/region-worker.js';
import { NON_WAKING_MESSAGES, WAITING_POINTS, WORKFLOWS_OF } from './waiting-points.js';

export const REPO = path.resolve(import.meta.dirname, '../..');
/** What bundleWorkflows (src/workers/region-worker.ts) hands the bundler, relative to the repository. */
export const BUNDLE_ENTRIES = [
  ...[worker.WORKFLOWS_PATH, worker.WORKFLOW_INTERCEPTORS_PATH, worker.TRACING_INTERCEPTORS_PATH],
  FAILURE_CONVERTER_PATH,
].map((p) => path.relative(REPO, p));
const STORY = 'src/contracts/story.ts';

/** Workflow APIs that wait, start, handle or end a run: each call is read and held to the list. */
const RULED = (
  'sleep condition setHandler startChild executeChild continueAsNew ' + 'makeContinueAsNewFunc patched deprecatePatch'
).split(' ');
/** Workflow APIs that do none of that (a proxy's calls are read where they are made). */
const INERT = new Set(
  (
    'proxyActivities proxyLocalActivities log.debug log.info log.warn log.error workflowInfo setCurrentDetails ' +
    'setWorkflowOptions upsertSearchAttributes metricMeter.createCounter ApplicationFailure.create ' +
    'defineSearchAttributeKey defineSignal defineUpdate defineQuery setDefaultQueryHandler allHandlersFinished ' +
    'defaultPayloadConverter.toPayload'
  ).split(' '),
);
/** Workflow APIs the list has no place for: a call of one fails the gate, with why. */
const REFUSED: Record<string, string> = {
  setDefaultSignalHandler: 'a default handler takes any signal: which waits it ends cannot be named',
  setDefaultUpdateHandler: 'a default handler takes any Update: which waits it ends cannot be named',
  CancellationScope: 'a scope cancels waits by a way out the list cannot declare',
};
/**
 * Calls through `any` a person has read, by module and callee: CommonJS gives them no type. In tracing.cjs: the
 * interceptor chain's `next` and the SDK's OpenTelemetry interceptors, which add headers and never a command.
 */
const VOUCHED = new Set(
  ['next', 'traced[side][method]', 'traced.inbound.execute', 'traced.inbound.handleSignal'].map(
    (callee) => `src/workflows/tracing.cjs ${callee}`,
  ),
);

type At = { name: string; at: string };
export interface WorkflowSourceReading {
  /** The modules read, relative to the root. */
  modules: string[];
  /** Calls of workflow APIs, by API (`sleep`, `log.info`, `CancellationScope.cancellable`). */
  calls: Map<string, number>;
  /** Labels a timer's summary resolves to (`holdLabels.budget`), and every label the source names. */
  timerLabels: Set<string>;
  labels: Set<string>;
  handled: (At & { kind: 'signal' | 'update' | 'query' })[];
  activities: (At & { local: boolean })[];
  children: At[];
  /** Workflows that continue as new (`continueAsNew<typeof w>`). */
  continued: At[];
  /** Patch ids: a patched branch is read like any other code, its waits held to the list. */
  patches: At[];
  problems: string[];
}

/** Reads the workflow bundle of the repository at `root` (its tsconfig.json and src/). */
export function readWorkflowSource(root = REPO, entries = BUNDLE_ENTRIES): WorkflowSourceReading {
  const tsconfig = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile).config as {
    compilerOptions: {};
  };
  const options = { ...ts.convertCompilerOptionsFromJson(tsconfig.compilerOptions, root).options, allowJs: true };
  const rootNames = entries.map((e) => path.join(root, e));
  const program = ts.createProgram({ rootNames, options, host: cachedHost(options) });
  const checker = program.getTypeChecker();
  const relative = (node: ts.Node) => path.relative(root, node.getSourceFile().fileName);
  const read: WorkflowSourceReading = {
    ...{ modules: [], calls: new Map(), timerLabels: new Set(), labels: new Set() },
    ...{ handled: [], activities: [], children: [], continued: [], patches: [], problems: [] },
  };

  // The bundle's modules of ours: the entries and what they import or require for a value (not `import type`).
  const files: ts.SourceFile[] = [];
  for (let file, queue = [...rootNames]; (file = queue.shift());) {
    const source = program.getSourceFile(file);
    if (!source || files.includes(source)) continue;
    files.push(source);
    walk(source, (node) => {
      const spec =
        (ts.isImportDeclaration(node) && !node.importClause?.isTypeOnly) ||
        (ts.isExportDeclaration(node) && !node.isTypeOnly)
          ? node.moduleSpecifier
          : ts.isCallExpression(node) && /^(require|import)$/.test(node.expression.getText())
            ? node.arguments[0]
            : undefined;
      const resolved =
        spec && ts.isStringLiteral(spec) && ts.resolveModuleName(spec.text, file, options, ts.sys).resolvedModule;
      if (resolved && !resolved.isExternalLibraryImport) queue.push(resolved.resolvedFileName);
    });
  }
  read.modules = files.map(relative);

  // @temporalio/workflow's exports, by the symbol each resolves to.
  const dealias = (s?: ts.Symbol) => (s && s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s);
  const sdk = ts.resolveModuleName('@temporalio/workflow', rootNames[0]!, options, ts.sys).resolvedModule!;
  const sdkModule = checker.getSymbolAtLocation(program.getSourceFile(sdk.resolvedFileName)!)!;
  const exported = new Map(checker.getExportsOfModule(sdkModule).map((s) => [dealias(s)!, s.name]));
  const exportOf = (node?: ts.Node) => node && exported.get(dealias(checker.getSymbolAtLocation(node))!);

  /** The workflow API a call resolves to: an export (`sleep`), a member of one (`log.info`), or undefined. */
  function apiOf(call: ts.CallExpression | ts.NewExpression): string | undefined {
    const decl = checker.getResolvedSignature(call)?.declaration;
    const named = decl && 'name' in decl ? (decl.name as ts.Node) : undefined;
    const { expression: callee } = call;
    const owner = decl && (ts.isClassDeclaration(decl.parent) || ts.isInterfaceDeclaration(decl.parent));
    const ownerName = owner ? exportOf((decl.parent as ts.ClassDeclaration).name) : undefined;
    return (
      exportOf(named) ??
      (ts.isPropertyAccessExpression(callee) && exportOf(callee.expression)
        ? `${exportOf(callee.expression)}.${callee.name.text}`
        : undefined) ??
      (ownerName && (decl && ts.isConstructorDeclaration(decl) ? ownerName : `${ownerName}.${named?.getText()}`)) ??
      (decl?.getSourceFile().fileName.includes('/@temporalio/workflow/') ? callee.getText() : undefined)
    );
  }

  /** What an expression holds, followed through parentheses, casts, constants and properties (not into a label). */
  function valueOf(node: ts.Node, depth = 0): ts.Node {
    if (ts.isParenthesizedExpression(node) || ts.isAsExpression(node) || ts.isNonNullExpression(node))
      return valueOf(node.expression, depth);
    const symbol = ts.isShorthandPropertyAssignment(node)
      ? checker.getShorthandAssignmentValueSymbol(node)
      : ts.isIdentifier(node) || ts.isPropertyAccessExpression(node)
        ? dealias(checker.getSymbolAtLocation(node))
        : undefined;
    const decl = symbol?.valueDeclaration;
    const init = decl && (ts.isVariableDeclaration(decl) || ts.isPropertyAssignment(decl)) && decl.initializer;
    return init && !labelOf(decl) && depth < 10 ? valueOf(init, depth + 1) : node;
  }

  /** `holdLabels.budget` for the declaration of a label of src/contracts/story.ts, else undefined. */
  function labelOf(decl?: ts.Declaration): string | undefined {
    const group = decl?.parent?.parent;
    return decl &&
      group &&
      ts.isVariableDeclaration(group) &&
      relative(decl) === STORY &&
      (ts.isPropertyAssignment(decl) || ts.isMethodDeclaration(decl))
      ? `${group.name.getText()}.${decl.name.getText()}`
      : undefined;
  }
  const labelAt = (node: ts.Node) => labelOf(checker.getSymbolAtLocation(node)?.valueDeclaration);
  // The labels each label stands for: itself, or, for one that picks among others (`holdLabels.wait`), those.
  const choices = new Map<string, string[]>();
  walk(program.getSourceFile(path.join(root, STORY))!, (node) => {
    const own = labelOf(node as ts.Declaration);
    const picked = new Set<string>();
    if (own) walk(node, (inner) => void (ts.isPropertyAccessExpression(inner) && picked.add(labelAt(inner) ?? '')));
    picked.delete('');
    if (own) choices.set(own, picked.size ? [...picked] : [own]);
  });
  /** The labels a summary resolves to (`holdLabels.wait(…)`, `ok ? a(…) : b(…)`), or undefined when it is not one. */
  function labelsOf(node: ts.Node, called = false): string[] | undefined {
    const value = valueOf(node);
    if (ts.isConditionalExpression(value)) {
      const [a, b] = [labelsOf(value.whenTrue, called), labelsOf(value.whenFalse, called)];
      return a && b ? [...a, ...b] : undefined;
    }
    if (called) return choices.get(labelAt(value) ?? '');
    return ts.isCallExpression(value) ? labelsOf(value.expression, true) : undefined;
  }
  function summaryOf(options?: ts.Expression): ts.Node | undefined {
    const value = options && valueOf(options);
    const p = value && ts.isObjectLiteralExpression(value) ? value.properties : undefined;
    const summary = p?.find((p) => !ts.isSpreadAssignment(p) && p.name?.getText() === 'summary');
    return summary && ts.isPropertyAssignment(summary) ? summary.initializer : summary;
  }
  /** The activity a proxy's member names: `proxy.name`, `proxy['name']`, `const { name: alias } = proxy`. */
  function activityName(callee: ts.Expression): string | undefined {
    if (ts.isPropertyAccessExpression(callee)) return callee.name.text;
    if (ts.isElementAccessExpression(callee) && ts.isStringLiteralLike(callee.argumentExpression))
      return callee.argumentExpression.text;
    const decl = ts.isIdentifier(callee) ? checker.getSymbolAtLocation(callee)?.valueDeclaration : undefined;
    if (decl && ts.isBindingElement(decl)) return (decl.propertyName ?? decl.name).getText();
    return decl && ts.isVariableDeclaration(decl) && decl.initializer ? activityName(decl.initializer) : undefined;
  }

  for (const source of files) {
    const at = (node: ts.Node) => `${relative(node)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
    const problem = (node: ts.Node, what: string) => void read.problems.push(`${at(node)}: ${what}`);
    walk(source, (node) => {
      if (ts.isPropertyAccessExpression(node) && relative(node) !== STORY)
        for (const l of choices.get(labelAt(node) ?? '') ?? []) read.labels.add(l);
      const value = ts.isIdentifier(node) && isValueUse(node) ? exportOf(node) : undefined;
      if (value && (RULED.includes(value) || value in REFUSED || value.startsWith('proxy')))
        problem(node, `${value} used as a value: the reading follows calls, not where a value goes`);
      if (!ts.isCallExpression(node) && !ts.isNewExpression(node)) return;
      const [args, callee] = [node.arguments ?? ts.factory.createNodeArray<ts.Expression>(), node.expression];
      const type = checker.getTypeAtLocation(callee);
      if (type.flags & ts.TypeFlags.Any)
        return VOUCHED.has(`${relative(node)} ${callee.getText()}`)
          ? undefined
          : problem(node, `a call through \`any\` (${callee.getText()}): it could be a workflow API`);
      for (const t of type.isUnion() ? type.types : [type]) {
        const proxied = /^(Local)?ActivityFunctionWithOptions$/.exec(
          (t.aliasSymbol && exported.get(t.aliasSymbol)) ?? '',
        );
        const name = proxied && activityName(callee);
        if (name) read.activities.push({ name, local: !!proxied[1], at: at(node) });
        else if (proxied) problem(node, 'an activity call whose activity this reading cannot name');
      }
      const api = apiOf(node);
      if (!api) return;
      read.calls.set(api, (read.calls.get(api) ?? 0) + 1);
      const refused = REFUSED[api] ?? REFUSED[api.split('.')[0]!];
      if (refused) return problem(node, `${api}: ${refused}`);
      if (/^(sleep|condition)$/.test(api) && args.some(ts.isSpreadElement))
        return problem(node, `${api} with spread arguments: its timer and summary cannot be read`);
      if (api === 'sleep' || (api === 'condition' && args.length >= 2)) {
        const summary = summaryOf(args[api === 'sleep' ? 1 : 2]);
        const labels = summary && labelsOf(summary);
        const not = summary ? 'a summary that is not a label of src/contracts/story.ts' : 'no summary';
        if (!labels) problem(node, `${api} with a timer but ${not}`);
        for (const l of labels ?? []) read.timerLabels.add(l);
      } else if (api === 'setHandler') {
        const message = valueOf(args[0]!);
        const define = ts.isCallExpression(message) && /^define(Signal|Update|Query)$/.exec(apiOf(message) ?? '');
        const name = define && message.arguments[0];
        if (name && ts.isStringLiteralLike(name))
          read.handled.push({ name: name.text, kind: define[1]!.toLowerCase() as 'signal', at: at(node) });
        else problem(node, `a handler for ${args[0]!.getText()}, defined where this reading cannot find`);
      } else if (api === 'startChild' || api === 'executeChild') {
        const type = checker.getTypeAtLocation(args[0]!);
        const decl = dealias(checker.getSymbolAtLocation(args[0]!))?.valueDeclaration;
        // The SDK names a child by its function's name: a function's, or the constant's it is assigned to.
        const named = decl && (ts.isFunctionDeclaration(decl) || ts.isVariableDeclaration(decl)) && decl.name;
        const name = type.isStringLiteral() ? type.value : named && named.getText();
        if (name) read.children.push({ name, at: at(node) });
        else problem(node, `${api} of a workflow this reading cannot name`);
      } else if (api === 'continueAsNew' || api === 'makeContinueAsNewFunc') {
        const [of] = node.typeArguments ?? [];
        const name = of && ts.isTypeQueryNode(of) && dealias(checker.getSymbolAtLocation(of.exprName))?.name;
        if (name) read.continued.push({ name, at: at(node) });
        else problem(node, `${api} without \`<typeof workflow>\`: which workflow continues cannot be read`);
      } else if (api === 'patched' || api === 'deprecatePatch') {
        const id = checker.getTypeAtLocation(args[0]!);
        if (id.isStringLiteral()) read.patches.push({ name: id.value, at: at(node) });
        else problem(node, `${api} with an id this reading cannot read`);
      } else if (!INERT.has(api) && !RULED.includes(api))
        problem(node, `${api}: a workflow API the gate does not classify`);
    });
  }
  return read;
}

/** What is wrong with a reading against test/support/waiting-points.ts: empty when the gate passes. */
export function gateProblems(read: WorkflowSourceReading): string[] {
  const problems = [...read.problems];
  const on = WAITING_POINTS.map((p) => p.on as Partial<Record<string, string>> & { labels?: readonly string[] });
  const declared = (key: string) => new Set(on.flatMap((o) => (o[key] ? [o[key]] : [])));
  const [timers, activities, localActivities, children] = ['timer', 'activity', 'localActivity', 'child'].map(declared);
  const labels = new Set([...timers!, ...on.flatMap((o) => o.labels ?? [])]);
  for (const l of read.timerLabels) if (!timers!.has(l)) problems.push(`timer label ${l} is not a declared timer`);
  for (const l of read.labels) if (!labels.has(l)) problems.push(`label ${l} is not declared`);
  for (const l of labels) if (!read.labels.has(l)) problems.push(`label ${l} is declared but never used`);
  for (const { name, local, at } of read.activities)
    if (!(local ? localActivities : activities)!.has(name))
      problems.push(`${at}: ${local ? 'local activity' : 'activity'} ${name} is not declared`);
  for (const { name, at } of read.children)
    if (!children!.has(name)) problems.push(`${at}: child ${name} is not declared`);
  const continuing = new Set<string>(
    WAITING_POINTS.flatMap((p) => ('continueAsNew' in p.on ? WORKFLOWS_OF[p.workflow] : [])),
  );
  for (const { name, at } of read.continued)
    if (!continuing.has(name)) problems.push(`${at}: ${name} continues as new at no declared point`);
  const waking = new Set(
    WAITING_POINTS.flatMap((p) => p.exits).flatMap((exit) =>
      /^(signal|update|kept-waiting):/.test(exit) ? [exit.split(':')[1]] : [],
    ),
  );
  for (const { name, kind, at } of read.handled)
    if (kind !== 'query' && !waking.has(name) && !(name in NON_WAKING_MESSAGES))
      problems.push(`${at}: ${kind} ${name} ends no declared wait and is not declared as non-waking`);
  return problems;
}

/** An identifier used for its value: not called, not a member's owner, not imported, bound or named in a type. */
function isValueUse(id: ts.Identifier): boolean {
  const p = id.parent;
  const called = (e: ts.Node) =>
    (ts.isCallExpression(e.parent) || ts.isNewExpression(e.parent)) && e.parent.expression === e;
  if (ts.isPropertyAccessExpression(p)) return p.name === id && !called(p);
  return !(
    called(id) ||
    [ts.isImportSpecifier, ts.isExportSpecifier, ts.isImportClause, ts.isNamespaceImport, ts.isBindingElement].some(
      (is) => is(p),
    ) ||
    [ts.isTypeQueryNode, ts.isTypeReferenceNode, ts.isQualifiedName].some((is) => is(p)) ||
    ((ts.isFunctionDeclaration(p) || ts.isVariableDeclaration(p)) && p.name === id)
  );
}

function walk(node: ts.Node, visit: (node: ts.Node) => void): void {
  visit(node);
  node.forEachChild((child) => walk(child, visit));
}

/** A compiler host that parses a file once per text: the mutation tests read many copies of the same modules. */
const parsed = new Map<string, ts.SourceFile>();
function cachedHost(options: ts.CompilerOptions): ts.CompilerHost {
  const host = ts.createCompilerHost(options, true);
  const parse = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, language, ...rest) => {
    const key = `${fileName}\0${JSON.stringify(language)}`;
    const cached = parsed.get(key);
    if (cached?.text === host.readFile(fileName)) return cached;
    const made = parse(fileName, language, ...rest);
    if (made) parsed.set(key, made);
    return made;
  };
  return host;
}
