/** A region's processor-event receiver on loopback for a test, and a fake processor signing for it. */
import { FakeProcessor, processorKeyOf } from '../../dev/fake-processor.js';
import { generateSigningSecret } from '../../src/delivery/signing.js';
import { createProcessorReceiver, type ProcessorReceiver, type ReceiverOptions } from '../../src/processor/receiver.js';
import type { TestRegion } from './harness.js';

export interface TestReceiver {
  receiver: ProcessorReceiver;
  /** Signs with the receiver's processor secret. */
  processor: FakeProcessor;
  close(): Promise<void>;
}

/** Listens on a free port; `secret` defaults to a new one. Quiet unless told otherwise. */
export async function startTestReceiver(
  region: TestRegion,
  options: Partial<Omit<ReceiverOptions, 'region' | 'pool' | 'client' | 'taskQueue' | 'processorKey'>> & { secret?: string } = {},
): Promise<TestReceiver> {
  const { secret = generateSigningSecret(), ...rest } = options;
  const receiver = createProcessorReceiver({
    region: region.config.region,
    pool: region.pool,
    client: region.client,
    taskQueue: region.config.taskQueue,
    processorKey: processorKeyOf(secret),
    log: () => undefined,
    ...rest,
  });
  const { port } = await receiver.listen(0);
  return { receiver, processor: new FakeProcessor(`http://127.0.0.1:${port}/processor/events`, secret), close: () => receiver.close() };
}
