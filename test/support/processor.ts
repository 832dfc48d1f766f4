/** A region's processor-event receiver on loopback for a test, and a fake processor signing for it. */
import { Client } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import { FakeProcessor, processorKeyOf } from '../../dev/fake-processor.js';
import { generateSigningSecret } from '../../src/delivery/standard-webhooks.js';
import { createPool } from '../../src/db/pool.js';
import { silentLogger } from '../../src/observability/logger.js';
import { serveMetrics } from '../../src/observability/metrics-listener.js';
import {
  createProcessorReceiver,
  REFUSAL_POOL_OPTIONS,
  type ProcessorReceiver,
  type ReceiverOptions,
} from '../../src/processor/receiver.js';
import { expect } from 'vitest';
import type { TestRegion } from './harness.js';
import { waitUntil } from './wait.js';

export interface TestReceiver {
  receiver: ProcessorReceiver;
  /** Signs with the receiver's processor secret. */
  processor: FakeProcessor;
  /** Its counters, on an address of their own (the receiver process's PROCESSOR_RECEIVER_METRICS_ADDRESS). */
  metricsUrl: string;
  close(): Promise<void>;
}

/** Listens on a free port; `secret` defaults to a new one. Quiet unless told otherwise. */
export async function startTestReceiver(
  region: TestRegion,
  options: Partial<Omit<ReceiverOptions, 'region' | 'pool' | 'taskQueue' | 'processorKey'>> & {
    secret?: string;
  } = {},
): Promise<TestReceiver> {
  const { secret = generateSigningSecret(), ...rest } = options;
  // Refusals through a small pool of their own, as the receiver process has.
  const refusalPool = createPool(region.databaseUrl, REFUSAL_POOL_OPTIONS);
  const receiver = createProcessorReceiver({
    region: region.config.region,
    pool: region.pool,
    refusalPool,
    client: region.client,
    taskQueue: region.config.taskQueue,
    processorKey: processorKeyOf(secret),
    logger: silentLogger(),
    ...rest,
  });
  const { port } = await receiver.listen(0);
  const metrics = await serveMetrics(receiver.metrics, { host: '127.0.0.1', port: 0 }, 'receiver');
  return {
    receiver,
    processor: new FakeProcessor(`http://127.0.0.1:${port}/processor/events`, secret),
    metricsUrl: metrics.url,
    close: async () => {
      await metrics.close();
      await receiver.close();
      await refusalPool.end();
    },
  };
}

/**
 * One processor capture of `holdId` through a receiver of the region (its client encrypts like the workers), waited
 * for until applied and its webhook delivered: its signal, its hold's event workflow and its webhook's delivery
 * workflow are in the region's histories then.
 */
/**
 * The receiver's client as src/bin/receiver.ts makes it: the region's, with the tracing interceptor, which carries a
 * callback's trace into the workflow it signals (when a tracer provider is registered: src/observability/tracing.ts).
 */
export function tracedClient(region: TestRegion): Client {
  return new Client({
    connection: region.client.connection,
    namespace: region.config.namespace,
    dataConverter: region.client.options.dataConverter,
    interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] },
  });
}

/** One capture through the region's receiver, as production's would come (traced), to its delivered webhook. */
export async function captureThroughReceiver(region: TestRegion, holdId: string, currency: string): Promise<void> {
  const { processor, close } = await startTestReceiver(region, { client: tracedClient(region) });
  try {
    const event = {
      eventId: `evt_${holdId}_1`,
      holdId,
      sequence: 1,
      type: 'hold.captured' as const,
      amountMinor: 4321,
      currency,
    };
    expect((await processor.send(event)).status).toBe(202);
    await waitUntil(
      async () =>
        (
          await region.pool.query(`SELECT 1 FROM webhook_deliveries WHERE hold_id = $1 AND status = 'delivered'`, [
            holdId,
          ])
        ).rowCount === 1,
      'the capture is applied and its webhook delivered',
    );
  } finally {
    await close();
  }
}
