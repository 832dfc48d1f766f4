/**
 * The variable tables of docs/configuration.md, written from the schema (src/config-schema.ts): `npm run docs:config`
 * rewrites them, and a unit test fails while the file and the schema disagree.
 */
import fs from 'node:fs';
import path from 'node:path';
import {
  ADMIN_CLIENT_VARIABLES,
  DEV_VARIABLES,
  docOf,
  LISTENERS,
  regionVariables,
  VARIABLES,
  type Setting,
} from '../src/config-schema.js';
import { REGIONS } from '../src/contracts/regions.js';

export const CONFIGURATION_DOC = path.resolve(import.meta.dirname, '../docs/configuration.md');

type Row = readonly [names: string, fallback: string, meaning: string];

const code = (name: string) => `\`${name}\``;

function rowOf(names: readonly string[], setting: Setting): Row {
  const doc = docOf(setting);
  if (!doc) throw new Error(`${names.join(', ')} has no docs: describe() it`);
  // The file form of a secret, how compose's `secrets:` reach a container (src/config.ts reads it).
  const all = doc.file ? names.flatMap((name) => [name, `${name}_FILE`]) : names;
  const file = doc.file ? '; `…_FILE`: a file holding the value instead (never both)' : '';
  return [all.map(code).join(', '), doc.default, `${doc.meaning}${file}`];
}

const rowsOf = (settings: Record<string, Setting>, nameOf = (key: string) => key): Row[] =>
  Object.entries(settings).map(([key, setting]) => rowOf([nameOf(key)], setting));

function table(rows: readonly Row[]): string {
  const cell = (text: string) => text.replaceAll('|', '\\|');
  return [
    '| variable | default | meaning |',
    '|---|---|---|',
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ].join('\n');
}

/** The product's variables: the mode and the regions, each region's own, the rest, the listeners. */
function productRows(): Row[] {
  const { HOLD_SWEEPER_MODE, HOLD_SWEEPER_REGIONS, ...rest } = VARIABLES;
  const first = { HOLD_SWEEPER_MODE: HOLD_SWEEPER_MODE!, HOLD_SWEEPER_REGIONS: HOLD_SWEEPER_REGIONS! };
  const perRegion = Object.entries(regionVariables('<r>')).map(([name, setting]) =>
    rowOf(
      REGIONS.map((region) => `${name}_${region.toUpperCase()}`),
      setting,
    ),
  );
  return [
    ...rowsOf(first),
    ...perRegion,
    ...rowsOf(rest),
    ...Object.entries(LISTENERS).flatMap(([prefix, settings]) => rowsOf(settings, (name) => `${prefix}_${name}`)),
  ];
}

const MARKERS = {
  product: [
    "<!-- the product's variables: written by npm run docs:config -->",
    "<!-- end of the product's variables -->",
  ],
  admin: [
    "<!-- the ops CLI's variables: written by npm run docs:config -->",
    "<!-- end of the ops CLI's variables -->",
  ],
  dev: [
    "<!-- the local stack's variables: written by npm run docs:config -->",
    "<!-- end of the local stack's variables -->",
  ],
} as const;

/** `doc` with each marked table written from the schema. */
export function withGeneratedTables(doc: string): string {
  const admin = Object.entries(ADMIN_CLIENT_VARIABLES).map(([name, setting]) =>
    rowOf(
      ['', ...REGIONS.map((region) => `_${region.toUpperCase()}`)].map((suffix) => `${name}${suffix}`),
      setting,
    ),
  );
  const tables = { product: table(productRows()), admin: table(admin), dev: table(rowsOf(DEV_VARIABLES)) };
  let out = doc;
  for (const [which, [start, end]] of Object.entries(MARKERS) as [keyof typeof MARKERS, readonly [string, string]][]) {
    const from = out.indexOf(start);
    const to = out.indexOf(end);
    if (from < 0 || to < from) throw new Error(`docs/configuration.md lacks the markers ${start} … ${end}`);
    out = `${out.slice(0, from + start.length)}\n\n${tables[which]}\n\n${out.slice(to)}`;
  }
  return out;
}

/** Rewrites docs/configuration.md's tables; true when the file changed. */
export function writeConfigurationDoc(): boolean {
  const before = fs.readFileSync(CONFIGURATION_DOC, 'utf8');
  const after = withGeneratedTables(before);
  if (after !== before) fs.writeFileSync(CONFIGURATION_DOC, after);
  return after !== before;
}
