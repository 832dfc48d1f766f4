/**
 * The benchmark's evidence: the Prometheus text it samples is read into the series the analysis needs, and the
 * charts are real Vega-Lite rendered to SVG by Vega.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parsePrometheus } from '../../bench/prometheus.js';
import { phaseSignals } from '../../bench/analysis.js';
import { renderSvg, throughputSpec } from '../../bench/charts.js';
import type { NightReport, NightSummary } from '../../bench/night-report.js';
import { markdownReport, ratioDecomposition } from '../../bench/report.js';
import {
  chartsNote,
  hasSeries,
  readSeries,
  seriesCommit,
  RESULTS_DIR,
  seriesFile,
  splitReport,
  writeNightReport,
} from '../../bench/results-archive.js';
import type { Sample } from '../../bench/sampler.js';
import { cpuBreakdown } from '../../bench/profile.js';
import { SERVER_METRICS } from '../../bench/sampler.js';

const SERVER_TEXT = (lockSum: number, lockCount: number, failed: number) => `# HELP cache_latency cache latency
# TYPE cache_latency histogram
cache_latency_sum{cache_type="mutablestate",namespace_id="a",operation="HistoryCacheGetOrCreate",service_name="history"} ${lockSum / 2}
cache_latency_sum{cache_type="mutablestate",namespace_id="b",operation="HistoryCacheGetOrCreate",service_name="history"} ${lockSum / 2}
cache_latency_count{cache_type="mutablestate",namespace_id="a",operation="HistoryCacheGetOrCreate",service_name="history"} ${lockCount}
cache_latency_sum{cache_type="events",namespace_id="a",operation="EventsCacheGetEvent",service_name="history"} 99
cache_latency_count{cache_type="events",namespace_id="a",operation="EventsCacheGetEvent",service_name="history"} 1
acquire_lock_failed{cache_type="mutablestate",namespace_id="a",operation="HistoryCacheGetOrCreate",service_name="history"} ${failed}
task_latency_queue_sum{archetype="workflow",operation="TransferActiveTaskStartChildExecution",task_type="x"} ${lockSum}
task_latency_queue_count{archetype="workflow",operation="TransferActiveTaskStartChildExecution",task_type="x"} ${lockCount}
unrelated_metric{a="b"} 5
`;

describe('parsePrometheus', () => {
  it('keeps the asked-for labels, sums over the rest, and skips other metrics', () => {
    const scrape = parsePrometheus(SERVER_TEXT(10, 4, 7), SERVER_METRICS);
    expect(scrape.get('cache_latency_sum{cache_type=mutablestate,operation=HistoryCacheGetOrCreate}')).toBe(10);
    expect(scrape.get('cache_latency_sum{cache_type=events,operation=EventsCacheGetEvent}')).toBe(99);
    expect(scrape.get('acquire_lock_failed')).toBe(7);
    expect([...scrape.keys()].some((k) => k.startsWith('unrelated'))).toBe(false);
  });
});

const sample = (phase: 'ceiling' | 'product', t: number, done: number, server: string): Sample => ({
  phase,
  t,
  progress: phase === 'ceiling' ? { completed: done } : { released: done, delivered: done },
  cpu: { temporal: t * 0.8, postgres: t * 0.1 },
  rssMiB: {},
  server: Object.fromEntries(parsePrometheus(server, SERVER_METRICS)),
  sdk: {},
});

describe('phaseSignals', () => {
  it('derives the lock wait, the queue time and the cores from the differences between the first and last sample', () => {
    const samples = [
      sample('product', 0, 0, SERVER_TEXT(1, 10, 0)),
      sample('product', 10, 400, SERVER_TEXT(21, 110, 50)),
    ];
    const signals = phaseSignals(samples, 'product')!;
    // (21 − 1) s of waiting over (110 − 10) acquisitions = 200 ms each.
    expect(signals.server.executionLockWaitMs).toBe(200);
    expect(signals.server.executionLockFailuresPerSecond).toBe(5);
    expect(signals.server.queueByTask[0]).toEqual({
      task: 'TransferActiveTaskStartChildExecution',
      perSecond: 10,
      meanMs: 200,
    });
    expect(signals.coresByProcess).toEqual({ temporal: 0.8, postgres: 0.1 });
    expect(phaseSignals(samples, 'ceiling')).toBeUndefined();
  });
});

describe('charts', () => {
  it('renders the throughput chart to an SVG with a line per series', async () => {
    const series = [0, 5, 10, 15].flatMap((t) => [sample('ceiling', t, t * 40, ''), sample('product', t, t * 30, '')]);
    const svg = await renderSvg(throughputSpec({ series, workload: { holds: 600 } } as unknown as NightReport));
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('Holds per second over the run');
    for (const name of ['ceiling: no-op children completed', 'product: holds released', 'product: webhooks delivered'])
      expect(svg).toContain(name);
    // One path per series.
    expect(svg.match(/<path[^>]*aria-roledescription="line mark"/g)?.length).toBe(3);
  });
});

describe('ratioDecomposition', () => {
  // The 50,000-hold night of bench/results/night-50000-2-workers-region-per-process.json, its two phases.
  const report = {
    machine: { cpus: 2 },
    product: { seconds: 1897.5, cpu: { total: 2779.9 } },
    ceiling: { seconds: 1186.2, cpu: { total: 1582.6 } },
  } as unknown as NightReport;

  it('splits the ratio into cores kept busy and CPU per hold, whose product is the ratio of the two phases', () => {
    const d = ratioDecomposition(report)!;
    expect(d.productCores).toBeCloseTo(2779.9 / 1897.5, 6);
    expect(d.ceilingCores).toBeCloseTo(1582.6 / 1186.2, 6);
    expect(d.efficiency).toBeCloseTo(1582.6 / 2779.9, 6);
    expect(d.ratio).toBeCloseTo(1186.2 / 1897.5, 6);
    // Every core busy at the product's CPU per hold: the ceiling's time over the time its CPU seconds take on 2 cores.
    expect(d.bestRatio).toBeCloseTo(1186.2 / (2779.9 / 2), 6);
    // 0.8x the ceiling's time, with the product's CPU seconds.
    expect(d.coresForTarget).toBeCloseTo(2779.9 / (1186.2 / 0.8), 6);
  });

  it('has nothing to decompose without a ceiling', () => {
    expect(ratioDecomposition({ ...report, ceiling: undefined } as NightReport)).toBeUndefined();
  });
});

describe('a report apart from its series', () => {
  const report = {
    command: 'npm run bench -- --holds 600',
    workload: { holds: 600 },
    series: [sample('product', 0, 0, ''), sample('product', 2, 60, '')],
    merchantSeries: [{ merchantId: 'm_us_001', ratePerSecond: 5, limit: 6, perSecond: [[0, 5]] }],
    violations: [],
  } as unknown as NightReport;

  it('writes the summary as the JSON and the series beside it, gzipped, and reads them back', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-report-'));
    try {
      const file = path.join(dir, 'night-600.json');
      await writeNightReport(file, report);
      const summary = JSON.parse(fs.readFileSync(file, 'utf8')) as NightSummary;
      expect(hasSeries(summary)).toBe(false);
      expect(summary).toEqual(splitReport(report).summary);
      expect(seriesFile(file)).toBe(path.join(dir, 'night-600.series.json.gz'));
      const found = await readSeries(file);
      expect({ ...summary, ...found!.series }).toEqual(report);
      // Outside bench/results/ there is no archive to look in: no series, no error.
      fs.rmSync(seriesFile(file));
      expect(await readSeries(file)).toBeUndefined();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('renders the Markdown without charts, saying where the series are and how to draw them', () => {
    const file = path.join(RESULTS_DIR, 'night-5000-fault-free.json');
    const note = chartsNote(file, {
      titles: ['What the run waited on', 'CPU per process over time'],
      tarball: 'charts-2026-12-02.tar.gz',
    });
    expect(note).toContain('(what the run waited on; CPU per process over time)');
    expect(note).toContain(
      '`night-5000-fault-free.series.json.gz` on the `bench-archive` branch (`git fetch origin bench-archive`)',
    );
    expect(note).toContain('`npm run bench:report -- bench/results/night-5000-fault-free.json`');
    expect(note).toContain('`charts-2026-12-02.tar.gz`');
    // No link a checkout could not resolve.
    expect(note).not.toMatch(/\]\(/);
    // A night whose series are in the repository's own history says which commit, and where its charts were.
    const inHistory = chartsNote(file, { commit: 'eec382a', chartsDir: 'bench/results/charts/' });
    expect(inHistory).toContain(
      'the JSON as committed at eec382a (`git show eec382a:bench/results/night-5000-fault-free.json`)',
    );
    expect(inHistory).toContain('as first drawn, they are in `bench/results/charts/` at that commit.');

    // A committed night renders from its JSON alone, the note where its charts would stand.
    const committed = path.join(RESULTS_DIR, 'night-5000-fault-free.json');
    const markdown = markdownReport(
      JSON.parse(fs.readFileSync(committed, 'utf8')) as NightSummary,
      [],
      chartsNote(committed),
    );
    expect(markdown).toContain(
      `| Invariant violations | none (all seven checked) |\n\n${chartsNote(committed)}\n\n## What binds`,
    );
    expect(markdown).not.toContain('.svg');
  });

  it("finds a committed night's series in the repository's history, where its Markdown says they are", async () => {
    const file = path.join(RESULTS_DIR, 'night-5000-fault-free.json');
    const commit = await seriesCommit(file);
    expect(commit).toMatch(/^[0-9a-f]{7,}$/);
    const found = await readSeries(file);
    expect(found!.from).toBe(`${commit}:bench/results/night-5000-fault-free.json`);
    expect(found!.series.series.length).toBeGreaterThan(100);
    expect(found!.series.merchantSeries.length).toBeGreaterThan(0);
    // Every report that says its charts are not in this checkout names the commit that has its series.
    const notes = fs
      .readdirSync(RESULTS_DIR, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.md'))
      .flatMap((f) => {
        const note = fs
          .readFileSync(path.join(RESULTS_DIR, f), 'utf8')
          .split('\n')
          .find((l) => l.startsWith('**Charts**') && l.includes('not in this checkout'));
        return note ? [{ json: path.join(RESULTS_DIR, f.replace(/\.md$/, '.json')), note }] : [];
      });
    expect(notes.length).toBeGreaterThan(5);
    // Git abbreviates a hash by the size of the clone, so the note and this clone may spell one commit differently.
    const full = (commit: string) => execFileSync('git', ['rev-parse', commit], { encoding: 'utf8' }).trim();
    for (const { json, note } of notes) {
      const named = /the JSON as committed at ([0-9a-f]{7,}) \(/.exec(note)?.[1];
      expect(named, note).toBeDefined();
      expect(full(named!)).toBe(full((await seriesCommit(json))!));
    }
  }, 60_000);

  it('no committed report under bench/results/ carries raw series', () => {
    const files = fs.readdirSync(RESULTS_DIR, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThan(10);
    const withSeries = files.filter((f) => {
      const json = JSON.parse(fs.readFileSync(path.join(RESULTS_DIR, f), 'utf8')) as object | object[];
      return (Array.isArray(json) ? json : [json]).some(hasSeries);
    });
    expect(withSeries).toEqual([]);
  });
});

describe('the profile breakdown', () => {
  it('charges each sample to its nearest owned frame, Node internals to their caller, the sandbox entry apart, and leaves idle out', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'profile-'));
    const frame = (id: number, functionName: string, url: string, hitCount: number, children: number[] = []) => ({
      id,
      callFrame: { functionName, url },
      hitCount,
      children,
    });
    // 12 samples over 12 ms: 1 ms each.
    const profile = {
      startTime: 0,
      endTime: 12_000,
      nodes: [
        frame(1, '(root)', '', 0, [2, 5, 6, 7, 8]),
        frame(2, 'releaseHold', 'file:///app/src/activities/ledger.ts', 1, [3]),
        frame(3, 'query', 'file:///app/node_modules/pg/lib/client.js', 2, [4]),
        frame(4, 'write', 'node:net', 3),
        frame(5, '(idle)', '', 2),
        frame(6, '(garbage collector)', '', 1),
        frame(7, 'runTask', 'file:///tmp/x/workflow-bundle-abc.js', 1),
        frame(8, 'activate', 'file:///app/node_modules/@temporalio/worker/lib/workflow/vm-shared.js', 0, [9]),
        frame(9, 'runInContext', '', 2),
      ],
    };
    fs.writeFileSync(path.join(dir, 'CPU.1.cpuprofile'), JSON.stringify(profile));
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'not a profile');
    const breakdown = await cpuBreakdown(dir, 2);
    expect(breakdown).toEqual({
      profiles: 1,
      sampledSeconds: 0.01,
      perHold: [
        { owner: 'pg driver', ms: 2.5 },
        { owner: "the SDK entering the workflow sandbox (Node's vm timeout: a watchdog thread per entry)", ms: 1 },
        { owner: 'our code (src/)', ms: 0.5 },
        { owner: 'garbage collection (main thread)', ms: 0.5 },
        { owner: 'workflow code (the bundle: SDK workflow runtime and our workflows)', ms: 0.5 },
      ],
    });
  });
});
