/**
 * New waits the replay gate must catch, each written a different way into a copy of the source
 * (test/unit/workflow-gate.test.ts): each module's text after the edit, by path (a new module's from ''), and the
 * problem the gate must name. Data only, so the list can be run against any reading of the source.
 */
export interface Mutation {
  edits: Record<string, (text: string) => string>;
  bites: RegExp;
}

const RELEASE = 'src/workflows/release-expired-hold.ts';
const ANCHOR = '  const ctx = { region: input.region, holdId };\n';

/** `code` written into releaseExpiredHold after its first lines, `imports` above the module. */
const inRelease = (imports: string, code: string, more: Mutation['edits'] = {}): Mutation['edits'] => ({
  ...more,
  [RELEASE]: (text) => {
    if (!text.includes(ANCHOR)) throw new Error(`${RELEASE} no longer has the line the mutations are written after`);
    return `${imports}\n${text.replace(ANCHOR, `${ANCHOR}${code}\n`)}`;
  },
});
/** A module the mutation adds, by its path under src/ (it is in no checkout, so no prose names it in full). */
const added = (underSrc: string) => `src/${underSrc}`;
const wf = (names: string) => `import { ${names} } from '@temporalio/workflow';`;
const noSummary = (what: string, file = 'release-expired-hold.ts') =>
  new RegExp(`${file.replace('.', '\\.')}:\\d+: ${what} with a timer but no summary`);

export const MUTATIONS: Record<string, Mutation> = {
  'an unpatched wait': { edits: inRelease(wf('sleep'), 'await sleep(1000);'), bites: noSummary('sleep') },
  'a patched sleep': {
    edits: inRelease(wf('patched, sleep'), "if (patched('p1')) await sleep(1000);"),
    bites: noSummary('sleep'),
  },
  'a patched condition': {
    edits: inRelease(wf('condition, patched'), "if (patched('p2')) await condition(() => false, 5000);"),
    bites: noSummary('condition'),
  },
  'an inline signal': {
    edits: inRelease(wf('defineSignal, setHandler'), "setHandler(defineSignal('poke'), () => undefined);"),
    bites: /release-expired-hold\.ts:\d+: signal poke ends no declared wait/,
  },
  'a label the list lacks': {
    edits: inRelease(wf('condition'), "await condition(() => false, 5000, { summary: holdLabels.release('x') });"),
    bites: /timer label holdLabels\.release is not a declared timer/,
  },
  'sleep imported under another name': {
    edits: inRelease(wf('patched, sleep as nap'), "if (patched('p3')) await nap(1000);"),
    bites: noSummary('sleep'),
  },
  'a namespace import': {
    edits: inRelease("import * as wf from '@temporalio/workflow';", "if (wf.patched('p4')) await wf.sleep(1000);"),
    bites: noSummary('sleep'),
  },
  'sleep re-bound': {
    edits: inRelease(wf('patched, sleep'), "const s = sleep;\nif (patched('p5')) await s(1000);"),
    bites: noSummary('sleep'),
  },
  'a wrapper in a new module': {
    edits: inRelease(`${wf('patched')}\nimport { pause } from './pause.js';`, "if (patched('p6')) await pause(1000);", {
      [added('workflows/pause.ts')]: () => `${wf('sleep')}\nexport const pause = (ms: number) => sleep(ms);\n`,
    }),
    bites: noSummary('sleep', 'workflows/pause.ts'),
  },
  'a wrapper in a new module outside src/workflows': {
    edits: inRelease(
      `${wf('patched')}\nimport { pause } from '../contracts/pause.js';`,
      "if (patched('p8')) await pause(1000);",
      { [added('contracts/pause.ts')]: () => `${wf('sleep')}\nexport const pause = (ms: number) => sleep(ms);\n` },
    ),
    bites: noSummary('sleep', 'contracts/pause.ts'),
  },
  'a new CommonJS module': {
    edits: inRelease(
      `${wf('patched')}\nimport { pause } from './pause.cjs';`,
      "if (patched('p7')) await pause(1000);",
      {
        [added('workflows/pause.cjs')]: () =>
          "const { sleep } = require('@temporalio/workflow');\n\nexports.pause = (ms) => sleep(ms);\n",
      },
    ),
    bites: noSummary('sleep', 'pause.cjs'),
  },
  'a wait in the tracing interceptors (tracing.cjs)': {
    edits: {
      'src/workflows/tracing.cjs': (text) =>
        text.replace('exports.interceptors = () => {\n', "$&  void require('@temporalio/workflow').sleep(1000);\n"),
    },
    bites: noSummary('sleep', 'tracing.cjs'),
  },
  'a default signal handler that ends a wait': {
    edits: inRelease(
      wf('condition, setDefaultSignalHandler'),
      'let poked = false;\nsetDefaultSignalHandler(() => {\n  poked = true;\n});\nawait condition(() => poked);',
    ),
    bites: /release-expired-hold\.ts:\d+: setDefaultSignalHandler: a default handler takes any signal/,
  },
  'a cancellable scope around a labelled sleep': {
    edits: inRelease(
      wf('CancellationScope, sleep'),
      "await CancellationScope.cancellable(() => sleep(1000, { summary: holdLabels.budget('normal', 'x') }));",
    ),
    bites: /release-expired-hold\.ts:\d+: CancellationScope\.cancellable: a scope cancels waits/,
  },
  'a child started by type name': {
    edits: inRelease(wf('startChild'), "await startChild('pruneLedger', { workflowId: 'x' });"),
    bites: /release-expired-hold\.ts:\d+: child pruneLedger is not declared/,
  },
  'an activity through a renamed proxy': {
    edits: inRelease(
      wf('proxyActivities as acts'),
      "const { releaseHold: releaseNow } = acts<Activities>({ startToCloseTimeout: '1m' });\n" +
        'await releaseNow({ holdId, expiresAt: input.expiresAt, cutoff: input.cutoff });',
    ),
    bites: /release-expired-hold\.ts:\d+: activity releaseHold is not declared/,
  },
  'a wait on a Trigger (an API the gate does not classify)': {
    edits: inRelease(wf('Trigger'), 'const poked = new Trigger<void>();\nawait poked;'),
    bites: /release-expired-hold\.ts:\d+: Trigger: a workflow API the gate does not classify/,
  },
  'a call through any': {
    edits: inRelease(wf('sleep'), 'const later: any = sleep;\nawait later(1000);'),
    bites: /release-expired-hold\.ts:\d+: a call through `any` \(later\)/,
  },
};
