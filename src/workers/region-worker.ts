/**
 * Builds one Temporal worker per region from one binary: the workflow bundle is built once and shared, and
 * each worker gets only its own region's ledger pool, namespace and task queue.
 */
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, DefaultLogger, Worker, type NativeConnection, type WorkerOptions, type WorkflowBundle } from '@temporalio/worker';
import type { MetricMeter } from '@temporalio/common';
import type pg from 'pg';
import { createActivities } from '../activities/index.js';
import { dataConverterFor, FAILURE_CONVERTER_PATH } from '../codec/encryption-codec.js';
import type { RegionConfig, WebhookConfig } from '../config.js';
import { createAgents } from '../delivery/http-sender.js';

/** The workflow entry point, as source under tsx and vitest, as compiled JavaScript under dist/. */
export const WORKFLOWS_PATH = fileURLToPath(new URL(`../workflows/index${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url));

/** The product's workflows; the benchmark passes its own entry (the same workflows plus its ceiling). */
export async function bundleWorkflows(workflowsPath = WORKFLOWS_PATH): Promise<WorkflowBundle> {
  // The bundle carries the failure converter: workflow-side failures are encoded (encrypted) like the rest.
  return bundleWorkflowCode({ workflowsPath, failureConverterPath: FAILURE_CONVERTER_PATH, logger: new DefaultLogger('WARN') });
}

export interface RegionWorkerOptions {
  connection: NativeConnection;
  region: RegionConfig;
  pool: pg.Pool;
  workflowBundle: WorkflowBundle;
  webhooks: WebhookConfig;
  /** Product metrics (the runtime's meter, exported with the SDK's on the Prometheus endpoint). */
  meter?: MetricMeter;
  /** Worker tuning (concurrency, pollers); the SDK's defaults otherwise. */
  tuning?: Partial<Pick<WorkerOptions, 'maxConcurrentActivityTaskExecutions' | 'maxConcurrentWorkflowTaskExecutions' | 'maxCachedWorkflows'>>;
}

export function createRegionWorker({ connection, region, pool, workflowBundle, webhooks, meter, tuning }: RegionWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection,
    namespace: region.namespace,
    taskQueue: region.taskQueue,
    workflowBundle,
    // Inputs and results leave this process encrypted when the region has keys (src/codec/encryption-codec.ts).
    dataConverter: dataConverterFor(region.payloadKeys),
    activities: createActivities({ region: region.region, pool, endpointRules: webhooks, agents: createAgents(), meter }),
    ...tuning,
  });
}
