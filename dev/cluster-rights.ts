/**
 * deploy/temporal/server/cluster-rights.json, the one table of who may call what on the project's Temporal clusters:
 * the server's authorizer embeds it (authorizer.go), the cluster test calls every method as every caller against it,
 * and docs/security.md prints it (clusterRightsMatrix; a unit test keeps the two equal).
 */
import fs from 'node:fs';
import path from 'node:path';

export type RightsService = 'WorkflowService' | 'OperatorService';

interface ClusterRights {
  /** Each caller: the token that makes a call that caller's, and who holds it. */
  callers: Record<string, { token: string; who: string }>;
  /** Rights the authorizer allows only in part: service → method → caller → which part. */
  narrowed: Partial<Record<RightsService, Record<string, Record<string, string>>>>;
  /** Service → method → the callers that may call it (none: refused to every caller). */
  methods: Record<RightsService, Record<string, string[]>>;
}

const CLUSTER_RIGHTS_FILE = path.resolve(import.meta.dirname, '../deploy/temporal/server/cluster-rights.json');

export const CLUSTER_RIGHTS: ClusterRights = JSON.parse(fs.readFileSync(CLUSTER_RIGHTS_FILE, 'utf8')) as ClusterRights;

/** The caller every connection is, token or not. */
export const ANYONE = 'anyone';

/** Whether `caller` may call `service`'s `method` by the table (`anyone`'s methods included). */
export function mayCall(service: RightsService, method: string, caller: string): boolean {
  const callers = CLUSTER_RIGHTS.methods[service][method] ?? [];
  return callers.includes(caller) || callers.includes(ANYONE);
}

/**
 * The table as docs/security.md prints it: its callers, then a row per method that some caller may call (✓, or ✓¹
 * where only in part, footnoted), then the methods no caller may call.
 */
export function clusterRightsMatrix(rights: ClusterRights = CLUSTER_RIGHTS): string {
  const callers = Object.keys(rights.callers);
  const lines = [
    '| Caller | Token | Who |',
    '| --- | --- | --- |',
    ...callers.map((c) => `| \`${c}\` | \`${rights.callers[c]!.token}\` | ${rights.callers[c]!.who} |`),
    '',
    `| Method | ${callers.map((c) => `\`${c}\``).join(' | ')} |`,
    `| --- |${callers.map(() => ' :-: |').join('')}`,
  ];
  const notes: string[] = [];
  const refused: string[] = [];
  for (const service of Object.keys(rights.methods) as RightsService[]) {
    for (const [method, allowed] of Object.entries(rights.methods[service])) {
      if (allowed.length === 0) {
        refused.push(`\`${method}\``);
        continue;
      }
      const cells = callers.map((caller) => {
        if (!allowed.includes(caller)) return '';
        const narrowed = rights.narrowed[service]?.[method]?.[caller];
        if (!narrowed) return '✓';
        notes.push(`${notes.length + 1}. \`${caller}\`'s \`${method}\`: ${narrowed}.`);
        return `✓${notes.length}`;
      });
      lines.push(`| ${service}.${method} | ${cells.join(' | ')} |`);
    }
  }
  return [...lines, '', ...notes, '', `Refused to every caller: ${refused.join(', ')}.`, ''].join('\n');
}

export const SECURITY_DOC = path.resolve(import.meta.dirname, '../docs/security.md');
const BEGIN =
  '<!-- the cluster rights: written by npm run docs:config from deploy/temporal/server/cluster-rights.json -->';
const END = '<!-- end of the cluster rights -->';

/** `doc` (docs/security.md) with the matrix between its markers written from the table. */
export function withClusterRightsMatrix(doc: string): string {
  const start = doc.indexOf(BEGIN);
  const end = doc.indexOf(END);
  if (start < 0 || end < start) throw new Error(`docs/security.md lacks the markers ${BEGIN} … ${END}`);
  return `${doc.slice(0, start + BEGIN.length)}\n\n${clusterRightsMatrix()}\n${doc.slice(end)}`;
}

/** Rewrites docs/security.md's matrix; whether it changed. */
export function writeSecurityDoc(): boolean {
  const doc = fs.readFileSync(SECURITY_DOC, 'utf8');
  const written = withClusterRightsMatrix(doc);
  if (written !== doc) fs.writeFileSync(SECURITY_DOC, written);
  return written !== doc;
}
