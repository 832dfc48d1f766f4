/**
 * Worker Deployment Versioning: which build a worker is, and making a build the deployment's current version.
 *
 * Every worker declares `<deployment>.<build id>`. New workflows (and hold workflows at their next task: they are
 * AUTO_UPGRADE) go to the deployment's current version; a sweep is PINNED and finishes on the build that started
 * it. The rollout (set-current-version, ramping, rollback, draining) is in docs/deploys.md.
 */
import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import type { SetCurrentMode } from '../config.js';
import { DeploymentError } from '../errors.js';

/**
 * The build id: WORKER_BUILD_ID when set (the image's git revision), otherwise a hash of the workflow bundle, so
 * two processes running the same workflow code are the same build and a change to it is always a new one.
 */
export function buildIdOf(workflowBundle: { code: string }, configured?: string): string {
  return configured ?? `wf-${createHash('sha256').update(workflowBundle.code).digest('hex').slice(0, 12)}`;
}

export type SetCurrentOutcome =
  | { status: 'made-current' }
  | { status: 'already-current' }
  /** Another version is current and the mode is `if-none`, or the mode is `never`: the operator promotes this one. */
  | { status: 'left'; current: string | undefined };

/** How long a starting worker keeps trying: the server only knows a version once its pollers have reached it. */
const SET_CURRENT_DEADLINE_MS = 60_000;
const SET_CURRENT_RETRY_MS = 250;

/**
 * Makes `version` the deployment's current version if `mode` says so. Call it once the version's workers are
 * polling: until the server has seen a poller of a version it refuses to make it current, so this retries (for up
 * to a minute) before failing with a DeploymentError. Safe for replicas starting together: the change carries the
 * conflict token of the state it was decided on, and a replica that loses the race re-reads and finds it done.
 */
export async function setCurrentVersionIfWanted(
  client: Client,
  namespace: string,
  version: WorkerDeploymentVersion,
  mode: SetCurrentMode,
  deadlineMs = SET_CURRENT_DEADLINE_MS,
): Promise<SetCurrentOutcome> {
  if (mode === 'never')
    return {
      status: 'left',
      current: await currentBuildId(client, namespace, version.deploymentName).catch(() => undefined),
    };
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      const described = await describe(client, namespace, version.deploymentName);
      const current = described?.workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId || undefined;
      if (current === version.buildId) return { status: 'already-current' };
      if (current !== undefined && mode === 'if-none') return { status: 'left', current };
      await client.workflowService.setWorkerDeploymentCurrentVersion({
        namespace,
        deploymentName: version.deploymentName,
        buildId: version.buildId,
        conflictToken: described?.conflictToken ?? undefined,
        identity: client.options.identity,
      });
      return { status: 'made-current' };
    } catch (err) {
      if (Date.now() > deadline) {
        throw new DeploymentError(
          `${version.deploymentName}.${version.buildId}`,
          `could not be made current: ${(err as Error).message}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, SET_CURRENT_RETRY_MS));
    }
  }
}

/** The deployment's current build id; undefined when it has none (or does not exist yet). */
export async function currentBuildId(
  client: Client,
  namespace: string,
  deploymentName: string,
): Promise<string | undefined> {
  const described = await describe(client, namespace, deploymentName);
  return described?.workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId || undefined;
}

/** The deployment as the server describes it; undefined while no worker of it has polled yet. */
async function describe(client: Client, namespace: string, deploymentName: string) {
  try {
    return await client.workflowService.describeWorkerDeployment({ namespace, deploymentName });
  } catch (err) {
    // gRPC NOT_FOUND: no version of this deployment has been seen yet.
    if ((err as { code?: number }).code === 5) return undefined;
    throw err;
  }
}

/**
 * The visibility query for workflows still pinned to `version` and running: while it counts any, that build's
 * workers must keep running (what `temporal worker deployment describe-version` reports as draining, without the
 * server's minutes of refresh delay). `temporal workflow count --query "<this>"` runs it from a shell.
 */
export function pinnedToVersionQuery(version: WorkerDeploymentVersion): string {
  return `TemporalWorkerDeploymentVersion = '${version.deploymentName}:${version.buildId}' AND TemporalWorkflowVersioningBehavior = 'Pinned' AND ExecutionStatus = 'Running'`;
}
