/**
 * What the workflows' source says about where they wait, read from its syntax tree (TypeScript's parser) rather than
 * by pattern: every `sleep` and every `condition` with a timeout and the label its summary resolves to, every label
 * used at all, and every message a handler is set for, wherever and however it is defined. What cannot be resolved
 * is a problem, never skipped: an unlabelled timer, a summary that is not one of src/contracts/story.ts's labels, a
 * handler whose definition the reading cannot find.
 */
import ts from 'typescript';

export interface SourceFile {
  file: string;
  text: string;
}

export interface WorkflowSourceReading {
  /** Labels a timer's summary resolves to (`holdLabels.budget`). */
  timerLabels: Set<string>;
  /** Every label the source names (timers, activities). */
  labels: Set<string>;
  /** Messages a handler is set for, by name and kind. */
  handled: { name: string; kind: 'signal' | 'update' | 'query' }[];
  problems: string[];
}

const LABEL_GROUPS = ['holdLabels', 'holdEventsLabels', 'resendLabels'];
const DEFINERS: Record<string, 'signal' | 'update' | 'query'> = {
  defineSignal: 'signal',
  defineUpdate: 'update',
  defineQuery: 'query',
};

const parse = ({ file, text }: SourceFile) => ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);

function walk(node: ts.Node, visit: (node: ts.Node) => void): void {
  visit(node);
  node.forEachChild((child) => walk(child, visit));
}

/** `holdLabels.budget` for `holdLabels.budget`, else undefined. */
function labelNamed(node: ts.Node): string | undefined {
  if (!ts.isPropertyAccessExpression(node)) return undefined;
  const { expression: group, name } = node;
  return ts.isIdentifier(group) && LABEL_GROUPS.includes(group.text) ? `${group.text}.${name.text}` : undefined;
}

/** `holdLabels.budget` for `holdLabels.budget(...)`, else undefined. */
const labelCalled = (node: ts.Node) => (ts.isCallExpression(node) ? labelNamed(node.expression) : undefined);

/**
 * The labels each label function stands for: itself, or, for one that picks among others (`holdLabels.wait`), the
 * labels it returns.
 */
export function labelChoices(story: SourceFile): Map<string, string[]> {
  const choices = new Map<string, string[]>();
  walk(parse(story), (node) => {
    if (!ts.isVariableDeclaration(node) || !ts.isIdentifier(node.name) || !LABEL_GROUPS.includes(node.name.text))
      return;
    if (!node.initializer || !ts.isObjectLiteralExpression(node.initializer)) return;
    for (const property of node.initializer.properties) {
      if (!property.name || !ts.isIdentifier(property.name)) continue;
      const picked = new Set<string>();
      walk(property, (inner) => {
        const label = labelCalled(inner);
        if (label) picked.add(label);
      });
      const own = `${node.name.text}.${property.name.text}`;
      choices.set(own, picked.size ? [...picked] : [own]);
    }
  });
  return choices;
}

/** The declaration `const <name> = …` nearest above `from` in its enclosing scopes. */
function initializerOf(name: string, from: ts.Node): ts.Expression | undefined {
  for (let scope: ts.Node | undefined = from.parent; scope; scope = scope.parent) {
    let found: ts.Expression | undefined;
    scope.forEachChild((child) => {
      if (!ts.isVariableStatement(child)) return;
      for (const d of child.declarationList.declarations) {
        if (ts.isIdentifier(d.name) && d.name.text === name && d.initializer) found = d.initializer;
        if (ts.isObjectBindingPattern(d.name) && d.name.elements.some((e) => e.name.getText() === name))
          found = d.initializer;
      }
    });
    if (found) return found;
  }
  return undefined;
}

/** The labels an expression given as a summary resolves to, or undefined when it is not a label. */
function labelsOf(expression: ts.Expression, choices: Map<string, string[]>, depth = 0): string[] | undefined {
  const label = labelCalled(expression);
  if (label) return choices.get(label) ?? [label];
  if (ts.isIdentifier(expression) && depth < 5) {
    const init = initializerOf(expression.text, expression);
    return init ? labelsOf(init, choices, depth + 1) : undefined;
  }
  return undefined;
}

/** The `summary` of an options argument: its expression, or undefined when it has none. */
function summaryOf(options: ts.Expression | undefined): ts.Expression | undefined {
  if (!options || !ts.isObjectLiteralExpression(options)) return undefined;
  for (const p of options.properties) {
    if (ts.isPropertyAssignment(p) && p.name.getText() === 'summary') return p.initializer;
    if (ts.isShorthandPropertyAssignment(p) && p.name.text === 'summary') return p.name;
  }
  return undefined;
}

const calleeName = (call: ts.CallExpression) =>
  ts.isIdentifier(call.expression)
    ? call.expression.text
    : ts.isPropertyAccessExpression(call.expression)
      ? call.expression.name.text
      : undefined;

/**
 * Reads `files` (the workflows' source). `definitions`: message definitions exported elsewhere (src/contracts), by
 * the name they are imported as.
 */
export function readWorkflowSource(
  files: SourceFile[],
  story: SourceFile,
  definitions: Record<string, unknown>,
): WorkflowSourceReading {
  const choices = labelChoices(story);
  const reading: WorkflowSourceReading = { timerLabels: new Set(), labels: new Set(), handled: [], problems: [] };
  for (const file of files) {
    const tree = parse(file);
    const at = (node: ts.Node) => `${file.file}:${tree.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
    const message = (node: ts.Expression): { name: string; kind: 'signal' | 'update' | 'query' } | undefined => {
      if (ts.isCallExpression(node)) {
        const kind = DEFINERS[calleeName(node) ?? ''];
        const [name] = node.arguments;
        return kind && name && ts.isStringLiteralLike(name) ? { name: name.text, kind } : undefined;
      }
      if (!ts.isIdentifier(node)) return undefined;
      const local = initializerOf(node.text, node);
      if (local) return message(local);
      const imported = definitions[node.text] as { type?: string; name?: string } | undefined;
      return imported?.name && imported.type && imported.type in { signal: 1, update: 1, query: 1 }
        ? { name: imported.name, kind: imported.type as 'signal' | 'update' | 'query' }
        : undefined;
    };
    walk(tree, (node) => {
      const label = labelNamed(node);
      if (label) for (const l of choices.get(label) ?? [label]) reading.labels.add(l);
      if (!ts.isCallExpression(node)) return;
      const callee = calleeName(node);
      const timer =
        callee === 'sleep'
          ? { what: 'sleep', options: node.arguments[1] }
          : callee === 'condition' && node.arguments.length >= 2
            ? { what: 'condition', timeout: node.arguments[1], options: node.arguments[2] }
            : undefined;
      if (timer && 'timeout' in timer && timer.timeout && ts.isObjectLiteralExpression(timer.timeout)) {
        reading.problems.push(`${at(node)}: condition given options but no timeout: its summary labels no timer`);
      } else if (timer) {
        const summary = summaryOf(timer.options);
        const labels = summary && labelsOf(summary, choices);
        if (!labels)
          reading.problems.push(
            `${at(node)}: ${timer.what} with a timer but ${summary ? 'a summary that is not a label of src/contracts/story.ts' : 'no summary'}`,
          );
        for (const l of labels ?? []) reading.timerLabels.add(l);
      }
      if (callee === 'setHandler' && node.arguments[0]) {
        const found = message(node.arguments[0]);
        if (found) reading.handled.push(found);
        else
          reading.problems.push(
            `${at(node)}: a handler for ${node.arguments[0].getText()}, defined where this reading cannot find`,
          );
      }
    });
  }
  return reading;
}
