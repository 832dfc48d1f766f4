/**
 * Every reference in the repository leads somewhere a clone has: relative Markdown links resolve to a file or
 * folder next to the page, repository paths named in prose and comments exist, and nothing points at an issue
 * tracker a newcomer cannot read (say what the change was, or link the doc that explains it). Reads the file list
 * from git (tracked files, and new ones not yet committed); changes nothing.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** The kinds of text a reference can hide in. */
const TEXT_KINDS = /\.(?:md|ts|yml|yaml|sql|json)$/;

/** Recorded or generated data: the lock file, measured results, golden histories, snapshots. */
const NOT_SCANNED = [
  /^package-lock\.json$/,
  /^bench\/results\/.*\.json$/,
  /^test\/golden\/(?:histories|encrypted)\//,
  /(?:^|\/)__snapshots__\//,
];

/**
 * History by design: a measured result's report names the files and the work of its day, as they were then, a
 * change log names issues, and a released migration is never edited (src/db/migrate.ts). Only their links are checked.
 */
const RECORDED = [/^bench\/results\//, /(?:^|\/)CHANGELOG[^/]*\.md$/i, /^src\/db\/migrations\//];

/**
 * Paths the code writes at run time, named before they exist; each with its reason. Keep this short: a path in
 * prose that is not in the repository is almost always a stale one.
 */
const GENERATED: ReadonlyMap<string, string> = new Map([
  [
    'deploy/secrets/dex/dex-config.yaml',
    'Dex’s configuration, with its secrets: `npm run credentials` writes it, git ignores it',
  ],
]);

/** `[text](target)` and `![alt](target)`, with an optional title. */
const MARKDOWN_LINK = /!?\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g;
/**
 * A repository path in prose, a comment or a string; a further suffix (`.json.gz`, `.test.ts.snap`) belongs to it, so
 * the path checked is the whole file name.
 */
const REPOSITORY_PATH =
  /\b(?:src|docs|test|bench|dev|deploy|shared)\/[\w./-]+\.(?:ts|md|sql|yml|yaml|json|svg|cjs|js)\b(?:\.[\w.-]*\w)?/g;
/**
 * The word issue (or issues) and a number, with or without a hash sign; or a case numbered after one ("Case <n> of the
 * hardening issue"), which a clone cannot look up either.
 */
const ISSUE = /\b[Ii]ssues? #?\d+\b|\b[Cc]ase \d+ of the\b/g;
/** A link whose text names a function of the file it points to: [`releaseHold`](../src/activities/ledger.ts). */
const NAMED_LINK_TEXT = /^`(?:\w+\.)?(\w+)`$/;
const URL = /\bhttps?:\/\/[^\s)>\]'"`]+/g;

interface Problem {
  file: string;
  line: number;
  what: string;
}

/** Every file and folder a clone has (tracked, or new and not ignored), relative to the root. */
function repositoryEntries(): Set<string> {
  const listed = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
    cwd: ROOT,
    encoding: 'utf8',
  })
    .split('\0')
    .filter((f) => f !== '' && fs.existsSync(path.join(ROOT, f)));
  const entries = new Set<string>();
  for (const file of listed) {
    entries.add(file);
    for (let dir = path.posix.dirname(file); dir !== '.'; dir = path.posix.dirname(dir)) entries.add(dir);
  }
  return entries;
}

const sources = new Map<string, string>();
/** A file's text, read once. */
function readSource(repoPath: string): string {
  let text = sources.get(repoPath);
  if (text === undefined) sources.set(repoPath, (text = fs.readFileSync(path.join(ROOT, repoPath), 'utf8')));
  return text;
}

/** A path exists in the repository; an import's `.js` names its `.ts` source (NodeNext). */
function existsIn(entries: ReadonlySet<string>, repoPath: string): boolean {
  const normal = path.posix.normalize(repoPath).replace(/\/$/, '');
  if (normal === '.' || normal === '') return true;
  return entries.has(normal) || (normal.endsWith('.js') && entries.has(normal.replace(/\.js$/, '.ts')));
}

/** The problems in one file's text, `file` being its path from the root. */
function scanText(file: string, text: string, entries: ReadonlySet<string>): Problem[] {
  const problems: Problem[] = [];
  const markdown = file.endsWith('.md');
  const recorded = RECORDED.some((p) => p.test(file));
  text.split('\n').forEach((content, index) => {
    const line = index + 1;
    if (markdown) {
      for (const [, label, target] of content.matchAll(MARKDOWN_LINK)) {
        if (/^(?:[a-z][a-z0-9+.-]*:|#)/i.test(target!)) continue;
        const relative = decodeURIComponent(target!.replace(/[#?].*$/, ''));
        const resolved = relative.startsWith('/')
          ? relative.slice(1)
          : path.posix.join(path.posix.dirname(file), relative);
        if (resolved.startsWith('..') || !existsIn(entries, resolved)) {
          problems.push({ file, line, what: `link to ${target} (no such file)` });
          continue;
        }
        const named = NAMED_LINK_TEXT.exec(label!)?.[1];
        if (named && resolved.endsWith('.ts') && !new RegExp(`\\b${named}\\b`).test(readSource(resolved))) {
          problems.push({ file, line, what: `link to ${target} names \`${named}\`, which it does not contain` });
        }
      }
    }
    if (recorded) return;
    for (const [token] of content.replace(URL, '').matchAll(REPOSITORY_PATH)) {
      if (!existsIn(entries, token) && !GENERATED.has(token))
        problems.push({ file, line, what: `path ${token} (not in the repository)` });
    }
    for (const [reference] of content.matchAll(ISSUE))
      problems.push({ file, line, what: `"${reference}" (an issue a clone cannot read)` });
  });
  return problems;
}

const entries = repositoryEntries();
const scanned = [...entries].filter(
  (f) => TEXT_KINDS.test(f) && !NOT_SCANNED.some((p) => p.test(f)) && fs.statSync(path.join(ROOT, f)).isFile(),
);

describe('references in docs and code', () => {
  it('the scanner is not blind', () => {
    expect(scanned.length).toBeGreaterThan(100);
    expect(scanned).toContain('docs/architecture.md');
    const page = 'docs/architecture.md';
    // Built here, so that this file does not name them itself.
    const missing = ['no-such', 'page'].join('-');
    const tracker = ['iss', 'ue 12'].join('');
    const compressed = ['test/golden/SUPPORTED.md', 'gz'].join('.');
    const text = [
      'The [runbook](runbook.md#sweepnotcompleting), the [README](../README.md), [MDN](https://developer.mozilla.org/) and [above](#x).',
      `A [stale link](${missing}.md), \`src/sql/holds.ts\`, \`src/sql/${missing}.ts\`, \`${compressed}\`.`,
      `Fixed in ${tracker}. [\`releaseHold\`](../src/activities/ledger.ts), [\`${missing.replaceAll('-', '')}\`](../src/activities/ledger.ts).`,
    ].join('\n');
    expect(scanText(page, text, entries)).toEqual([
      { file: page, line: 2, what: `link to ${missing}.md (no such file)` },
      { file: page, line: 2, what: `path src/sql/${missing}.ts (not in the repository)` },
      { file: page, line: 2, what: `path ${compressed} (not in the repository)` },
      {
        file: page,
        line: 3,
        what: `link to ../src/activities/ledger.ts names \`${missing.replaceAll('-', '')}\`, which it does not contain`,
      },
      { file: page, line: 3, what: `"${tracker}" (an issue a clone cannot read)` },
    ]);
  });

  it('every relative link, repository path and reference resolves in a clone', () => {
    const problems = scanned.flatMap((file) => scanText(file, fs.readFileSync(path.join(ROOT, file), 'utf8'), entries));
    expect(problems.map((p) => `${p.file}:${p.line}: ${p.what}`)).toEqual([]);
  });
});
