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

/** gRPC's PERMISSION_DENIED: the cluster's authorizer refused the caller. */
const PERMISSION_DENIED = 7;
/** How long a starting worker keeps trying: the server only knows a version once its pollers have reached it. */
const SET_CURRENT_DEADLINE_MS = 60_000;
const SET_CURRENT_RETRY_MS = 250;
/** Each call's own deadline: a call the server answers slowly (under load) is given up and tried again. */
const SET_CURRENT_CALL_MS = 10_000;

/**
 * Makes `version` the deployment's current version if `mode` says so, once the server has seen it poll every task
 * queue the current version polls (it refuses a promotion before: "missing active task queues"). Retries until
 * `deadlineMs` has passed, then fails with a DeploymentError: a call that timed out is described again before the
 * next (it may have taken effect), and a changed deployment is re-read. Safe for replicas starting together: the
 * change carries the conflict token of the state it was decided on, and a replica that loses the race re-reads and
 * finds it done. `onWait` hears why it is still waiting (the promote command prints it).
 */
export async function setCurrentVersionIfWanted(
  client: Client,
  namespace: string,
  version: WorkerDeploymentVersion,
  mode: SetCurrentMode,
  deadlineMs = SET_CURRENT_DEADLINE_MS,
  onWait: (why: string) => void = () => undefined,
): Promise<SetCurrentOutcome> {
  if (mode === 'never')
    return {
      status: 'left',
      current: await currentBuildId(client, namespace, version.deploymentName).catch(() => undefined),
    };
  const deadline = Date.now() + deadlineMs;
  const withDeadline = <T>(call: () => Promise<T>) =>
    client.withDeadline(Math.min(deadline, Date.now() + SET_CURRENT_CALL_MS), call);
  for (;;) {
    let why: string;
    try {
      const described = await withDeadline(() => describe(client, namespace, version.deploymentName));
      const current = described?.workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId || undefined;
      if (current === version.buildId) return { status: 'already-current' };
      if (current !== undefined && mode === 'if-none') return { status: 'left', current };
      const missing =
        current === undefined
          ? []
          : await withDeadline(() =>
              missingTaskQueues(
                client,
                namespace,
                { deploymentName: version.deploymentName, buildId: current },
                version,
              ),
            );
      if (missing.length === 0) {
        await withDeadline(() =>
          client.workflowService.setWorkerDeploymentCurrentVersion({
            namespace,
            deploymentName: version.deploymentName,
            buildId: version.buildId,
            conflictToken: described?.conflictToken ?? undefined,
            identity: client.options.identity,
          }),
        );
        return { status: 'made-current' };
      }
      why = `${version.buildId} does not poll ${missing.join(', ')} yet (the current build ${current} does)`;
    } catch (err) {
      why = (err as Error).message;
      // No wait fixes a credential the cluster refuses (a service's, where the deploy step's admin credential is due).
      if ((err as { code?: number }).code === PERMISSION_DENIED)
        throw new DeploymentError(`${version.deploymentName}.${version.buildId}`, `could not be made current: ${why}`);
    }
    if (Date.now() > deadline)
      throw new DeploymentError(`${version.deploymentName}.${version.buildId}`, `could not be made current: ${why}`);
    onWait(why);
    await new Promise((resolve) => setTimeout(resolve, SET_CURRENT_RETRY_MS));
  }
}

/** The task queues `current` polls that `candidate` does not (yet): the server refuses to promote it before. */
async function missingTaskQueues(
  client: Client,
  namespace: string,
  current: WorkerDeploymentVersion,
  candidate: WorkerDeploymentVersion,
): Promise<string[]> {
  const queues = async (v: WorkerDeploymentVersion) => {
    const { workerDeploymentVersionInfo } = await client.workflowService.describeWorkerDeploymentVersion({
      namespace,
      deploymentVersion: { deploymentName: v.deploymentName, buildId: v.buildId },
    });
    return new Set((workerDeploymentVersionInfo?.taskQueueInfos ?? []).map((q) => q.name ?? ''));
  };
  const [polled, polling] = await Promise.all([queues(current), queues(candidate).catch(() => new Set<string>())]);
  return [...polled].filter((q) => !polling.has(q)).sort();
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
