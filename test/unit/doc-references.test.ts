/**
 * Every reference in the repository leads somewhere a clone has: relative Markdown links resolve to a file or
 * folder next to the page, repository paths named in prose and comments exist, and nothing points at an issue
 * tracker a newcomer cannot read (say what the change was, or link the doc that explains it). Reads the file list
 * from git (tracked files, and new ones not yet committed); changes nothing.
 */
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

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

/** The first ```sh block after `heading` in `page`. */
function shellBlockAfter(page: string, heading: string): string {
  const text = readSource(page);
  const from = text.indexOf('```sh', text.indexOf(heading));
  return text.slice(from, text.indexOf('```', from + 5));
}

describe('what the docs say a deployment sets, against what runs', () => {
  it('docs/cluster.md: the by-hand steps set every variable compose gives the Temporal server and its schema tool', () => {
    const compose = parse(readSource('docker-compose.yml'), { merge: true }) as {
      services: Record<string, { environment?: Record<string, string> }>;
    };
    const steps = shellBlockAfter('docs/cluster.md', '## A locked cluster, by hand');
    // What the server's configuration and the schema script read (Go's own SSL_CERT_FILE has its paragraph).
    const read = new Set(
      [
        ...readSource('deploy/temporal/config.yaml').matchAll(/env "([A-Z0-9_]+)"/g),
        ...readSource('deploy/temporal/setup-schema.sh').matchAll(/\$\{?([A-Z0-9_]+)/g),
      ].map((m) => m[1]!),
    );
    const missing = ['temporal', 'temporal-schema']
      .flatMap((service) => Object.keys(compose.services[service]!.environment ?? {}))
      .filter((variable) => read.has(variable))
      // Compose's TEMPORAL_DB_PASSWORD_FILE is the file form of the value the steps export.
      .filter((variable) => !new RegExp(`\\b(${variable}|${variable.replace(/_FILE$/, '')})=`).test(steps));
    expect([...new Set(missing)]).toEqual([]);
  });

  it('docs/data-retention.md: how long Temporal keeps a closed workflow’s history, as setup-namespaces.sh sets it, and how to change it', () => {
    const script = readSource('deploy/temporal/setup-namespaces.sh');
    const retention = /--retention "\$\{NAMESPACE_RETENTION:-(\d+)d\}"/.exec(script)![1]!;
    const page = readSource('docs/data-retention.md');
    const section = page.slice(page.indexOf('## What Temporal keeps'));
    expect(section).toContain(`**${retention} days**`);
    expect(section).toContain(`--retention "\${NAMESPACE_RETENTION:-${retention}d}"`);
    expect(section).toMatch(/temporal operator namespace update --namespace [\w-]+ --retention \d+d/);
    // Each namespace it names is one the script creates.
    const namespaces = /NAMESPACES="\$\{NAMESPACES:-([^}]*)\}"/.exec(script)![1]!.split(' ');
    for (const [, namespace] of section.matchAll(/--namespace ([\w-]+)/g)) expect(namespaces).toContain(namespace);
  });

  it('deploy/ledger-init.sh takes each password as docs/security.md says: the variable, its _FILE, or compose’s file', () => {
    const script = readSource('deploy/ledger-init.sh');
    const roles = [...script.matchAll(/password ([A-Z_]+) \/run\/secrets\/ledger-([a-z-]+)-password/g)];
    expect(roles.map(([, role]) => role)).toEqual(['MIGRATOR', 'WORKER', 'RECEIVER', 'OPS', 'MERCHANT_API']);
    const page = readSource('docs/security.md');
    expect(page).toContain('`LEDGER_<ROLE>_PASSWORD`, or the file `LEDGER_<ROLE>_PASSWORD_FILE` names');
    for (const [, role] of roles) expect(page).toContain(`\`${role}\``);
    // Run, with a psql that records its arguments: one password from its variable, one from its file; the rest from
    // compose's files, which are not on this machine (so each is given).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-ledger-init-'));
    try {
      fs.writeFileSync(path.join(dir, 'psql'), `#!/bin/sh\nprintf '%s\\n' "$@" >> "${dir}/args"\ncat > /dev/null\n`, {
        mode: 0o755,
      });
      fs.writeFileSync(path.join(dir, 'ops'), 'from-a-file');
      const env = {
        PATH: `${dir}:${process.env.PATH}`,
        POSTGRES_USER: 'postgres',
        LEDGER_MIGRATOR_PASSWORD: 'from-the-variable',
        LEDGER_WORKER_PASSWORD: 'w',
        LEDGER_RECEIVER_PASSWORD: 'r',
        LEDGER_OPS_PASSWORD_FILE: path.join(dir, 'ops'),
        LEDGER_MERCHANT_API_PASSWORD: 'm',
      };
      execFileSync('sh', [path.join(ROOT, 'deploy/ledger-init.sh')], { env });
      const args = fs.readFileSync(path.join(dir, 'args'), 'utf8').split('\n');
      expect(args).toEqual(expect.arrayContaining(['migrator=from-the-variable', 'ops=from-a-file', 'merchant_api=m']));
      // Both forms of one: refused.
      expect(() =>
        execFileSync('sh', [path.join(ROOT, 'deploy/ledger-init.sh')], {
          env: { ...env, LEDGER_OPS_PASSWORD: 'o' },
          stdio: 'pipe',
        }),
      ).toThrow(/set LEDGER_OPS_PASSWORD or LEDGER_OPS_PASSWORD_FILE, not both/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Node 24, said once everywhere a tool or a person reads it', () => {
  it('.nvmrc, engines, devEngines, the image’s base and the README agree', () => {
    const major = readSource('.nvmrc').trim();
    expect(major).toBe('24');
    const pkg = JSON.parse(readSource('package.json')) as {
      engines: { node: string };
      devEngines: { runtime: { name: string; version: string; onFail: string } };
      license: string;
    };
    expect(pkg.engines.node).toBe(`>=${major}`);
    // npm 11's format: name, a semver range, and what to do otherwise. A warning: on Linux npm itself may run on an
    // older Node while every script runs on the registry's Node 24 (the README's first two commands).
    expect(pkg.devEngines).toEqual({ runtime: { name: 'node', version: `>=${major}`, onFail: 'warn' } });
    expect(readSource('Dockerfile')).toMatch(new RegExp(`^FROM node:${major}-bookworm-slim$`, 'm'));
    expect(readSource('README.md')).toMatch(/on macOS `nvm install` \(or `fnm use`\) in the clone reads `\.nvmrc`/);
    expect(pkg.license).toBe('Apache-2.0');
    expect(readSource('LICENSE')).toContain('Apache License\n                           Version 2.0, January 2004');
  });
});
