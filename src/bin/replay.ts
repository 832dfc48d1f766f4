/**
 * `npm run replay -- --bundle <path> [--sample 500] [--region us] [--deadline 5m] [--save <dir>]`: replays a sample of
 * each region's real histories (open workflows first, then last night's closed ones, every type; src/workers/replay.ts)
 * on the workflow bundle of a new build, as `npm run promote` does before it promotes. A history that does not replay
 * is saved in the golden sets' format under `--save` (a new directory in the system's temporary one unless given).
 *
 * `npm run replay -- --bundle <path> --from <dir> [--region us]` replays a saved set instead: the command a refusal
 * prints, to replay on one's own machine what the cluster refused (no cluster needed; an encrypted region's keys are).
 *
 * Exit codes: 0 every history replayed, 1 a refusal (a history that does not replay, or the deadline), 2 a
 * configuration error.
 */
import '../node-version.js';
import { parseArgs } from 'node:util';
import { dataConverterFor } from '../codec/encryption-codec.js';
import { ENTRY_POINTS, loadConfig, parseDuration, requireExplicitMode } from '../config.js';
import { ConfigError } from '../errors.js';
import { exitWith, nameProcess } from '../observability/logger.js';
import {
  DEFAULT_REPLAY_DEADLINE,
  DEFAULT_SAMPLE,
  defaultSaveDir,
  installReplayRuntime,
  readBundle,
  readHistorySet,
  replayRegions,
  replaySet,
} from '../workers/replay.js';

const log = nameProcess('replay');

async function main(): Promise<number> {
  requireExplicitMode();
  const { values } = parseArgs({
    options: {
      bundle: { type: 'string' },
      sample: { type: 'string' },
      region: { type: 'string' },
      deadline: { type: 'string' },
      save: { type: 'string' },
      from: { type: 'string' },
    },
  });
  const bundlePath = values.bundle ?? process.env.WORKFLOW_BUNDLE_PATH;
  if (!bundlePath)
    throw new ConfigError('--bundle', undefined, "the new build's workflow bundle (or WORKFLOW_BUNDLE_PATH)");
  const workflowBundle = { code: await readBundle(bundlePath) };
  const sample = Number(values.sample ?? DEFAULT_SAMPLE);
  if (!Number.isInteger(sample) || sample < 1) throw new ConfigError('--sample', values.sample, 'a positive integer');
  const deadlineMs = parseDuration('--deadline', values.deadline ?? DEFAULT_REPLAY_DEADLINE);
  const config = loadConfig(process.env, ENTRY_POINTS.promote);
  log.level = config.observability.logLevel.toLowerCase();
  installReplayRuntime(log);
  const regions = config.regions.filter((r) => values.region === undefined || r.region === values.region);
  if (regions.length === 0)
    throw new ConfigError('--region', values.region, config.regions.map((r) => r.region).join(', '));

  if (values.from !== undefined) {
    const histories = await readHistorySet(values.from);
    const failures = await replaySet(workflowBundle, histories, dataConverterFor(regions[0]!));
    for (const failure of failures) log.error({ from: values.from }, `refused: ${failure}`);
    log.info({ from: values.from, replayed: histories.length, refused: failures.length }, 'replayed the saved set');
    return failures.length === 0 ? 0 : 1;
  }

  const save = values.save ?? defaultSaveDir();
  const ok = await replayRegions(config, regions, { workflowBundle, bundlePath, sample, deadlineMs, save, log });
  return ok ? 0 : 1;
}

exitWith(main());
