/**
 * `npm run promote [-- --bundle <path>] [--build-id <id>] [--region us] [--deadline 10m] [--sample 500]
 * [--replay-deadline 5m] [--save <dir>] [--skip-replay]`: the deploy step that applies what a deploy changes on
 * Temporal (docs/deploys.md, "Rolling out"). First it replays a sample of every region's real histories on the new
 * build's workflow bundle (--bundle, or WORKFLOW_BUNDLE_PATH: what its workers run; src/workers/replay.ts), and
 * promotes nothing if one does not replay: it prints the workflow, the first event the new code diverges at, and the
 * command that replays the saved history locally. Then the build that is current in the region's worker deployment,
 * then, in production, the region's schedules (created, or updated to this build's configuration; in dev mode each
 * starting worker applies them). It runs with the namespace's admin credential (`<namespace>:admin`, the `operator`
 * caller of deploy/temporal/server/cluster-rights.json): a service's token may do neither. Exit code 1 at once when
 * the cluster refuses the credential. The build is --build-id, or this image's own (WORKER_BUILD_ID, or the hash of
 * the bundle, as its workers compute it). Without a bundle it refuses to run unless told --skip-replay, which it logs
 * as what it skips. It waits until the new build polls every task queue the current one does (the server refuses a
 * promotion before: "missing active task queues"), then promotes it, giving each call 10 s and trying again until the
 * deadline; a call that timed out is checked first, since it may have taken effect. It prints why it is still
 * waiting.
 *
 *   HOLD_SWEEPER_MODE=production HOLD_SWEEPER_REGIONS=us TEMPORAL_ADDRESS=... TEMPORAL_TLS_...=... \
 *   TEMPORAL_API_KEY_FILE=<the namespace admin's token> PAYLOAD_KEYS_US=... \
 *   npm run promote -- --bundle dist/workflow-bundle.js --build-id 3f2a1c9   (in the image: node dist/bin/promote.js)
 *
 * Exit codes: 0 current (made so, or already), 2 a configuration error, 1 not made current (a history that does not
 * replay, the replay's deadline, refused, or the deadline).
 */
import '../node-version.js';
import { parseArgs } from 'node:util';
import { Client } from '@temporalio/client';
import { ENTRY_POINTS, loadConfig, parseDuration, requireExplicitMode } from '../config.js';
import { ConfigError } from '../errors.js';
import { exitWith, nameProcess } from '../observability/logger.js';
import { addressesIn } from '../dev-stack.js';
import { dataConverterFor } from '../codec/encryption-codec.js';
import { applySchedules } from '../schedules.js';
import { connectClient, PLAINTEXT } from '../temporal-connection.js';
import { buildIdOf, setCurrentVersionIfWanted } from '../workers/deployment.js';
import {
  DEFAULT_REPLAY_DEADLINE,
  DEFAULT_SAMPLE,
  defaultSaveDir,
  installReplayRuntime,
  readBundle,
  replayRegions,
} from '../workers/replay.js';

/** Long enough for a new build's workers to start and poll on a loaded cluster; a promotion usually takes seconds. */
const DEFAULT_DEADLINE = '10m';

const log = nameProcess('promote');

async function main(): Promise<number> {
  requireExplicitMode();
  const { values } = parseArgs({
    options: {
      'build-id': { type: 'string' },
      region: { type: 'string' },
      deadline: { type: 'string' },
      bundle: { type: 'string' },
      sample: { type: 'string' },
      'replay-deadline': { type: 'string' },
      save: { type: 'string' },
      'skip-replay': { type: 'boolean' },
    },
  });
  const deadlineMs = parseDuration('--deadline', values.deadline ?? DEFAULT_DEADLINE);
  const replayDeadlineMs = parseDuration('--replay-deadline', values['replay-deadline'] ?? DEFAULT_REPLAY_DEADLINE);
  const sample = Number(values.sample ?? DEFAULT_SAMPLE);
  if (!Number.isInteger(sample) || sample < 1) throw new ConfigError('--sample', values.sample, 'a positive integer');
  const config = loadConfig(process.env, ENTRY_POINTS.promote);
  const bundlePath = values.bundle ?? process.env.WORKFLOW_BUNDLE_PATH;
  const code = bundlePath ? await readBundle(bundlePath) : undefined;
  if (code === undefined && !values['skip-replay'])
    throw new ConfigError(
      '--bundle',
      undefined,
      "the new build's workflow bundle (or WORKFLOW_BUNDLE_PATH), whose code replays the region's histories before " +
        'it is promoted; --skip-replay promotes without replaying',
    );
  const buildId = values['build-id'] ?? config.deployment.buildId ?? (code ? buildIdOf({ code }) : undefined);
  if (buildId === undefined)
    throw new ConfigError('--build-id', undefined, "the new build's id (WORKER_BUILD_ID of its workers), or --bundle");
  log.level = config.observability.logLevel.toLowerCase();
  installReplayRuntime(log);
  const regions = config.regions.filter((r) => values.region === undefined || r.region === values.region);
  if (regions.length === 0)
    throw new ConfigError('--region', values.region, config.regions.map((r) => r.region).join(', '));
  if (values['skip-replay'] || code === undefined || !bundlePath) {
    log.warn(
      { buildId, regions: regions.map((r) => r.region) },
      `--skip-replay: promoting ${buildId} WITHOUT replaying a single history of the region on it; a change that ` +
        'cannot replay what is in flight shows only after the promotion, as WorkflowTaskFailures',
    );
  } else {
    const save = values.save ?? defaultSaveDir();
    const replayed = await replayRegions(config, regions, {
      workflowBundle: { code },
      bundlePath,
      sample,
      deadlineMs: replayDeadlineMs,
      save,
      log,
    });
    if (!replayed) {
      log.error({ buildId }, `not promoted: ${buildId} does not replay what runs now (see above)`);
      return 1;
    }
  }
  const addresses = await addressesIn(config.mode);
  for (const region of regions) {
    const address = addresses(region).temporalAddress;
    if (!address) throw new ConfigError(`TEMPORAL_ADDRESS_${region.region.toUpperCase()}`, undefined, 'host:port');
    const connection = await connectClient(region.temporal ?? PLAINTEXT, address);
    try {
      const client = new Client({ connection, namespace: region.namespace, dataConverter: dataConverterFor(region) });
      const version = { deploymentName: config.deployment.deploymentName, buildId };
      let said = '';
      const outcome = await setCurrentVersionIfWanted(
        client,
        region.namespace,
        version,
        'always',
        deadlineMs,
        (why) => {
          if (why !== said) log.info({ region: region.region, buildId, why }, 'waiting to promote');
          said = why;
        },
      );
      log.info({ region: region.region, buildId, outcome: outcome.status }, 'promoted');
      // After the promotion: the schedules' next runs are the new build's to start. In dev mode each starting worker
      // applies them.
      if (config.mode !== 'dev') {
        await applySchedules(client, region, config);
        log.info({ region: region.region, scheduleId: region.scheduleId }, 'schedules applied');
      }
    } finally {
      await connection.close();
    }
  }
  return 0;
}

exitWith(main());
