/**
 * `npm run promote -- --build-id <id> [--region us] [--deadline 10m]`: makes a build the current version of the
 * region's worker deployment (docs/deploys.md, "Rolling out"), the step a rollout most often fails at under load. It
 * waits until the new build polls every task queue the current one does (the server refuses a promotion before:
 * "missing active task queues"), then promotes it, giving each call 10 s and trying again until the deadline; a call
 * that timed out is checked first, since it may have taken effect. It prints why it is still waiting.
 *
 *   HOLD_SWEEPER_MODE=production HOLD_SWEEPER_REGIONS=us TEMPORAL_ADDRESS=... TEMPORAL_TLS_...=... \
 *   npm run promote -- --build-id 3f2a1c9                       (in the image: node dist/bin/promote.js ...)
 *
 * Exit codes: 0 current (made so, or already), 2 a configuration error, 1 not made current by the deadline.
 */
import '../node-version.js';
import { parseArgs } from 'node:util';
import { Client } from '@temporalio/client';
import { ENTRY_POINTS, loadConfig, parseDuration, requireExplicitMode } from '../config.js';
import { ConfigError } from '../errors.js';
import { exitOnFatal, nameProcess } from '../observability/logger.js';
import { devCacheDir, readDevStackFile } from '../dev-stack.js';
import { connectClient, PLAINTEXT } from '../temporal-connection.js';
import { setCurrentVersionIfWanted } from '../workers/deployment.js';

/** Long enough for a new build's workers to start and poll on a loaded cluster; a promotion usually takes seconds. */
const DEFAULT_DEADLINE = '10m';

const log = nameProcess('promote');

async function main(): Promise<number> {
  requireExplicitMode();
  const { values } = parseArgs({
    options: { 'build-id': { type: 'string' }, region: { type: 'string' }, deadline: { type: 'string' } },
  });
  const buildId = values['build-id'];
  if (!buildId) throw new ConfigError('--build-id', undefined, "the new build's id (WORKER_BUILD_ID of its workers)");
  const deadlineMs = parseDuration('--deadline', values.deadline ?? DEFAULT_DEADLINE);
  const config = loadConfig(process.env, ENTRY_POINTS.promote);
  log.level = config.observability.logLevel.toLowerCase();
  const regions = config.regions.filter((r) => values.region === undefined || r.region === values.region);
  if (regions.length === 0)
    throw new ConfigError('--region', values.region, config.regions.map((r) => r.region).join(', '));
  const devStack = config.mode === 'dev' ? await readDevStackFile(devCacheDir()) : undefined;
  for (const region of regions) {
    const address = region.temporalAddress ?? devStack?.temporalAddress[region.region];
    if (!address) throw new ConfigError(`TEMPORAL_ADDRESS_${region.region.toUpperCase()}`, undefined, 'host:port');
    const connection = await connectClient(region.temporal ?? PLAINTEXT, address);
    try {
      const client = new Client({ connection, namespace: region.namespace });
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
    } finally {
      await connection.close();
    }
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => exitOnFatal(err, err instanceof ConfigError ? 2 : 1),
);
