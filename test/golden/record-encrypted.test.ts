/**
 * Records a small set of *encrypted* histories of the current release: `npm run golden:record` (with
 * record.test.ts). An encrypted region (a fixed test key, committed beside the histories: it protects nothing) runs a
 * sweep whose holds are delivered, quarantined and approved, discarded, and one processor capture; each run's history
 * is written, as the server stores it (ciphertext), to test/golden/encrypted/<release>/.
 *
 * test/integration/encryption.test.ts decodes every payload of every committed set with the current codec and
 * replays the histories: a codec change (the namespace binding, a new cipher) must keep old ciphertext readable.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { approveReplaySignal, discardSignal, statusQuery } from '../../src/contracts/messages.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import {
  ENCRYPTED_KEY_FILE,
  goldenRelease,
  goldenSetDir,
  historyFileContent,
  WORKFLOW_IDS_FILE,
} from '../support/golden.js';
import { captureThroughReceiver } from '../support/processor.js';
import { openHarness, type Harness } from '../support/harness.js';
import { holdWorkflowIdOf, recordedDecision, seedNight } from '../support/ledger.js';

const RELEASE = goldenRelease();
const OUT = goldenSetDir(RELEASE, 'encrypted');

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

it('records encrypted histories of this release: delivered, approved, discarded, a capture, the sweep', async () => {
  const key = { id: `golden-${RELEASE}`, key: randomBytes(32) };
  const eu = await harness.region('eu', { payloadKeys: [key] });
  await harness.startWorker(eu);
  const night = await seedNight(
    eu.pool,
    'eu',
    `${harness.id}ge`,
    { expired: 4, future: 1, merchants: 2 },
    harness.merchants,
  );
  const [ok, rejecting] = night.merchantIds as [string, string];
  harness.merchants.script(rejecting, {
    secrets: [night.secrets.get(rejecting)!],
    responses: [{ status: 400, body: '{"error":"unknown"}' }],
  });
  const sweepId = `sweep-eu-${harness.id}-golden-encrypted`;
  await eu.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: eu.config.taskQueue,
    workflowId: sweepId,
    args: [{ region: 'eu', releaseWaitMs: 60_000 }],
  });

  const holdsOf = async (merchantId: string) =>
    (
      await eu.pool.query<{ id: string }>(
        'SELECT id FROM auth_holds WHERE merchant_id = $1 AND expires_at <= now() ORDER BY id',
        [merchantId],
      )
    ).rows.map((r) => r.id);
  const [approved, discarded] = (await holdsOf(rejecting)) as [string, string];
  const handleOf = async (holdId: string) =>
    eu.client.workflow.getHandle(await holdWorkflowIdOf(eu.pool, 'eu', holdId));
  for (const id of [approved, discarded]) {
    await expect
      .poll(async () => (await (await handleOf(id)).query(statusQuery)).stage, { timeout: 30_000 })
      .toBe('quarantined');
  }
  harness.merchants.script(rejecting, { secrets: [night.secrets.get(rejecting)!], responses: [{ status: 200 }] });
  // Each decision recorded in the ledger first, as the operator CLI does before it sends one.
  await (
    await handleOf(approved)
  ).signal(
    approveReplaySignal,
    await recordedDecision(eu.pool, approved, 'approveReplay', 'alice', 'merchant fixed its parser'),
  );
  await (
    await handleOf(discarded)
  ).signal(discardSignal, await recordedDecision(eu.pool, discarded, 'discard', 'bob', 'merchant offboarded'));
  await (await handleOf(approved)).result();
  await (await handleOf(discarded)).result();

  await captureThroughReceiver(eu, night.future[0]!.id, 'EUR');

  // What the server stores: a client without the codec.
  const connection = await Connection.connect({ address: harness.address });
  const raw = new Client({ connection, namespace: eu.config.namespace });
  await fs.mkdir(OUT, { recursive: true });
  const names = new Map([
    [await holdWorkflowIdOf(eu.pool, 'eu', (await holdsOf(ok))[0]!), 'releaseExpiredHold-completed-delivered'],
    [await holdWorkflowIdOf(eu.pool, 'eu', approved), 'releaseExpiredHold-completed-delivered-replayed'],
    [await holdWorkflowIdOf(eu.pool, 'eu', discarded), 'releaseExpiredHold-completed-discarded'],
  ]);
  const ids: Record<string, string> = {};
  let n = 0;
  for await (const execution of raw.workflow.list({ query: `TaskQueue = '${eu.config.taskQueue}'` })) {
    if (execution.status.name === 'RUNNING') continue;
    const name = names.get(execution.workflowId) ?? `${execution.type}-${execution.status.name.toLowerCase()}`;
    if (execution.type === 'releaseExpiredHold' && !names.has(execution.workflowId)) continue;
    const file = `${name}-${n++}.json.gz`;
    const history = await raw.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
    await fs.writeFile(path.join(OUT, file), historyFileContent(history));
    ids[file] = execution.workflowId;
  }
  await connection.close();
  await fs.writeFile(path.join(OUT, WORKFLOW_IDS_FILE), `${JSON.stringify(ids, null, 2)}\n`);
  await fs.writeFile(
    path.join(OUT, ENCRYPTED_KEY_FILE),
    `${JSON.stringify({ namespace: eu.config.namespace, id: key.id, key: key.key.toString('base64') }, null, 2)}\n`,
  );
  expect(Object.keys(ids).length).toBeGreaterThanOrEqual(6);
});
