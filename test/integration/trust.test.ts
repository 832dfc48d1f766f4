/**
 * Nothing a caller says moves money (docs/security.md), on the real stack, with the real `temporal` CLI used as a
 * client with network access to Temporal and no payload key would use it:
 * - "expired" is decided by the ledger's clock: a sweep and a hold's release started with a cutoff in the
 *   future move no unexpired hold, record no future cutoff, and leave later sweeps as they were;
 * - an encrypted region refuses what is not encrypted (a workflow's input fails it before any command, a
 *   signal or Update is refused with why); the documented CLI path goes through the codec endpoint and carries only
 *   decisions the ledger recorded: one lifted from another hold, or minted, is refused by the ledger;
 * - four eyes in production: an approval needs a replay request approved by a second person, a skip a skip
 *   request the same way, and `alice`, ` ALICE ` and `ａｌｉｃｅ` are one person to the CLI and to the ledger.
 */
import { randomBytes } from 'node:crypto';
import { WorkflowFailedError, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkLedgerInvariants } from '../../bench/invariants.js';
import { startCodecServer } from '../../src/codec/codec-server.js';
import { EncryptionCodec } from '../../src/codec/encryption-codec.js';
import type { ReleaseExpiredHoldResult, SweepResult } from '../../src/contracts/domain.js';
import { identityKey } from '../../src/contracts/identity.js';
import { holdEventsWorkflowId, maxHoldIdBytes } from '../../src/contracts/ids.js';
import { approveReplaySignal, approveReplayUpdate, statusQuery } from '../../src/contracts/messages.js';
import { holdEventsStatusQuery, skipMissingEventSignal } from '../../src/contracts/processor.js';
import { isoUtc } from '../../src/db/sql.js';
import { expiredHoldsPage } from '../../src/sql/holds.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import {
  holdStates,
  holdWorkflowIdOf,
  ledgerEntryCount,
  recordedDecision,
  seedNight,
  type Night,
} from '../support/ledger.js';
import { startTestReceiver } from '../support/processor.js';
import { withOps, type Ops } from '../support/ops.js';
import { temporalCli } from '../support/temporal-cli.js';
import { waitUntil } from '../support/wait.js';

let harness: Harness;
beforeAll(async () => {
  harness = await openHarness();
});
afterAll(async () => {
  await harness?.close();
});

const FAR_FUTURE = '9999-12-31T00:00:00Z';
const NO_TOTALS = { found: 0, started: 0, alreadyStarted: 0, rejected: 0, pages: 0 };

/** A hold's exact (microsecond) expiry, as the sweep's page reads it. */
async function expiryOf(r: TestRegion, holdId: string): Promise<string> {
  const { rows } = await r.pool.query<{ e: string }>(
    `SELECT ${isoUtc('expires_at')} AS e FROM auth_holds WHERE id = $1`,
    [holdId],
  );
  return rows[0]!.e;
}

/**
 * `temporal workflow start` of one of our workflows in the region, its input plain JSON as a client without keys sends
 * it.
 */
async function cliStart(r: TestRegion, type: string, workflowId: string, input: unknown, extra: string[] = []) {
  const started = await temporalCli([
    'workflow',
    'start',
    '--namespace',
    r.config.namespace,
    '--task-queue',
    r.config.taskQueue,
    '--type',
    type,
    '--workflow-id',
    workflowId,
    '--input',
    JSON.stringify(input),
    ...extra,
  ]);
  expect(started, started.stderr).toMatchObject({ code: 0 });
}

/** The types of a workflow's history events, e.g. `activityTaskScheduledEventAttributes` -> `activityTaskScheduled`. */
async function eventTypes(r: TestRegion, workflowId: string): Promise<string[]> {
  const history = await r.client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).map((e) =>
    Object.keys(e)
      .find((k) => k.endsWith('EventAttributes') && e[k as keyof typeof e])!
      .replace(/EventAttributes$/, ''),
  );
}

/** `npm run ops -- <args> --json` in dev mode against the region (with its payload key): the answer it printed. */
async function opsJson(r: TestRegion, key: { id: string; key: Buffer }, args: string[]): Promise<any> {
  let answer: unknown;
  await withOps(
    r,
    'dev',
    async (ops, lines) => {
      expect(await ops(...args, '--json'), lines.join('\n')).toBe(0);
      answer = JSON.parse(lines.join('\n'));
    },
    key,
  );
  return answer;
}

/** Holds of the night quarantined by a rejecting merchant, each with its workflow id. */
async function quarantinedNight(
  r: TestRegion,
  prefix: string,
  holds: number,
): Promise<{ night: Night; rejecting: string; workflowIds: string[] }> {
  const night = await seedNight(r.pool, r.config.region, prefix, { expired: holds, merchants: 1 }, harness.merchants);
  const rejecting = night.merchantIds[0]!;
  harness.merchants.script(rejecting, {
    secrets: [night.secrets.get(rejecting)!],
    responses: [{ status: 400, body: '{"error":"schema"}' }],
  });
  await r.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: r.config.taskQueue,
    workflowId: `sweep-${prefix}`,
    args: [{ region: r.config.region, releaseWaitMs: 5_000 }],
  });
  const workflowIds = await Promise.all(night.expired.map((h) => holdWorkflowIdOf(r.pool, r.config.region, h.id)));
  for (const id of workflowIds) {
    await expect
      .poll(async () => (await r.client.workflow.getHandle(id).query(statusQuery)).stage, { timeout: 30_000 })
      .toBe('quarantined');
  }
  return { night, rejecting, workflowIds };
}

describe('the ledger decides "expired" by its own clock', () => {
  it('a sweep and a release started from the CLI with cutoff 9999 move no unexpired hold, record no future cutoff, and later sweeps are as before', async () => {
    // No payload keys: the region has no plaintext check at all, so it is not what keeps the money where it is.
    const us = await harness.region('us');
    await harness.startWorker(us);
    const night = await seedNight(us.pool, 'us', `${harness.id}t1`, { expired: 2, future: 4 }, harness.merchants);
    const [target, later] = night.future as [(typeof night.future)[0], (typeof night.future)[0]];
    const targetWorkflowId = await holdWorkflowIdOf(us.pool, 'us', target.id);

    const sweepId = `sweep-us-${harness.id}-far-future`;
    await cliStart(us, 'sweepExpiredHolds', sweepId, {
      region: 'us',
      releaseWaitMs: 5_000,
      progress: { cutoff: FAR_FUTURE, totals: NO_TOTALS },
    });
    await cliStart(us, 'releaseExpiredHold', targetWorkflowId, {
      region: 'us',
      holdId: target.id,
      expiresAt: await expiryOf(us, target.id),
      merchantId: target.merchantId,
      cutoff: FAR_FUTURE,
    });

    const released: ReleaseExpiredHoldResult = await us.client.workflow.getHandle(targetWorkflowId).result();
    expect(released.release).toMatchObject({ status: 'not_expired' });
    const swept: SweepResult = await us.client.workflow.getHandle(sweepId).result();
    // It did what any sweep does, no more: the two holds the ledger says expired, and nothing left to wait for.
    expect(swept).toMatchObject({ found: 2, started: 2, unreleasedAtEnd: 0 });
    const states = await holdStates(us.pool);
    expect(night.expired.map((h) => states.get(h.id)?.state)).toEqual(['released', 'released']);
    expect(night.future.map((h) => states.get(h.id)?.state)).toEqual(['active', 'active', 'active', 'active']);
    const { rows: webhooks } = await us.pool.query<{ n: number }>(
      'SELECT count(*)::integer AS n FROM webhook_deliveries WHERE hold_id = ANY($1)',
      [night.future.map((h) => h.id)],
    );
    expect(webhooks[0]!.n).toBe(0);
    expect(await ledgerEntryCount(us.pool)).toBe(2);
    expect(await checkLedgerInvariants(us.pool)).toEqual([]);

    // The sweep was recorded with the ledger's time, not the caller's; and the table refuses a future cutoff outright.
    const { rows: recorded } = await us.pool.query<{ sweep_id: string; bounded: boolean }>(
      'SELECT sweep_id, cutoff <= finished_at AND cutoff <= now() AS bounded FROM sweep_runs',
    );
    expect(recorded).toEqual([{ sweep_id: sweepId, bounded: true }]);
    await expect(
      us.pool
        .query(`INSERT INTO sweep_runs (sweep_id, cutoff, pages, found, started, already_started, rejected, unreleased_at_end)
                     VALUES ('forged', '${FAR_FUTURE}', 0, 0, 0, 0, 0, 0)`),
    ).rejects.toThrow(/sweep_runs_cutoff_not_after_finish/);

    // A hold that expires after that sweep finished is not one "an earlier sweep left active" (a future max(cutoff)
    // made every hold that, forever, and every later sweep start duplicates), and the next sweep releases it.
    await us.pool.query('UPDATE auth_holds SET expires_at = now() WHERE id = $1', [later.id]);
    const page = await expiredHoldsPage(us.pool, FAR_FUTURE, { expiresAt: '-infinity', id: '' }, 100, maxHoldIdBytes());
    expect(page.map((row) => [row.id, row.leftActiveByEarlierSweep])).toEqual([[later.id, false]]);
    const next: SweepResult = await us.client.workflow.execute(sweepExpiredHolds, {
      taskQueue: us.config.taskQueue,
      workflowId: `sweep-us-${harness.id}-after`,
      args: [{ region: 'us', releaseWaitMs: 5_000 }],
    });
    expect(next).toMatchObject({ found: 1, started: 1, alreadyStarted: 0, unreleasedAtEnd: 0 });
    expect((await holdStates(us.pool)).get(later.id)?.state).toBe('released');
    expect(await checkLedgerInvariants(us.pool)).toEqual([]);
  });
});

describe('an encrypted region takes nothing in clear', () => {
  const key = { id: 'k1', key: randomBytes(32) };
  let eu: TestRegion;
  beforeAll(async () => {
    eu = await harness.region('eu', { payloadKeys: [key] });
    await harness.startWorker(eu);
  });

  it('a release and a sweep started with plain JSON fail with UnencryptedPayloadRefused before any command: the expired hold is not touched', async () => {
    const night = await seedNight(eu.pool, 'eu', `${harness.id}t2a`, { expired: 1 }, harness.merchants);
    const hold = night.expired[0]!;
    const holdWorkflowId = await holdWorkflowIdOf(eu.pool, 'eu', hold.id);
    // Expired by every clock: only the refusal keeps this start from releasing it.
    await cliStart(eu, 'releaseExpiredHold', holdWorkflowId, {
      region: 'eu',
      holdId: hold.id,
      expiresAt: await expiryOf(eu, hold.id),
      merchantId: hold.merchantId,
    });
    const sweepId = `sweep-eu-${harness.id}-plain`;
    await cliStart(eu, 'sweepExpiredHolds', sweepId, { region: 'eu' });

    for (const workflowId of [holdWorkflowId, sweepId]) {
      const failure = await eu.client.workflow
        .getHandle(workflowId)
        .result()
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(failure).toBeInstanceOf(WorkflowFailedError);
      const cause = (failure as WorkflowFailedError).cause;
      expect(cause).toBeInstanceOf(ApplicationFailure);
      expect((cause as ApplicationFailure).type).toBe('UnencryptedPayloadRefused');
      expect(cause!.message).toMatch(/not encrypted/);
      // Started, one workflow task, failed: no activity, no local activity (a marker), no timer, no child.
      expect(await eventTypes(eu, workflowId)).toEqual([
        'workflowExecutionStarted',
        'workflowTaskScheduled',
        'workflowTaskStarted',
        'workflowTaskCompleted',
        'workflowExecutionFailed',
      ]);
    }
    expect((await holdStates(eu.pool)).get(hold.id)?.state).toBe('active');
    expect(await ledgerEntryCount(eu.pool)).toBe(0);
    expect(await checkLedgerInvariants(eu.pool)).toEqual([]);
  });

  it('plain JSON signals and Updates are refused with why and wedge nothing; through the codec endpoint the CLI carries what the ledger recorded (a discard, a replay request by batch); a payload lifted from another hold’s history, or minted without a record, changes nothing', async () => {
    const { night, rejecting, workflowIds } = await quarantinedNight(eu, `${harness.id}t2b`, 3);
    const [toDiscard, toApprove, victim] = workflowIds as [string, string, string];
    const victimHold = night.expired[2]!.id;
    const plain = (args: string[]) => temporalCli(['workflow', ...args, '--namespace', eu.config.namespace]);

    const signalled = await plain([
      'signal',
      '--workflow-id',
      toApprove,
      '--name',
      'approveReplay',
      '--input',
      '{"approvedBy":"mallory","reason":"because"}',
    ]);
    expect(signalled.code).toBe(0);
    await expect
      .poll(async () => (await eu.client.workflow.getHandle(toApprove).query(statusQuery)).ignoredSignals, {
        timeout: 10_000,
      })
      .toEqual([
        expect.objectContaining({
          signal: 'approveReplay',
          stage: 'quarantined',
          why: expect.stringMatching(/^approveReplay refused: the payload was not encrypted/),
        }),
      ]);
    const updated = await plain([
      'update',
      'execute',
      '--workflow-id',
      toDiscard,
      '--name',
      'discard',
      '--input',
      '{"by":"mallory","reason":"because"}',
    ]);
    // Refused by the validator (its reason is a failure message, encrypted like every other: "Encoded failure").
    expect(updated.code).not.toBe(0);
    expect(updated.stderr).toMatch(/unable to update workflow/);
    for (const id of workflowIds)
      expect((await eu.client.workflow.getHandle(id).query(statusQuery)).stage).toBe('quarantined');
    // The victim of the lifted payload below: one plain signal refused first, as every plain one is.
    await plain([
      'signal',
      '--workflow-id',
      victim,
      '--name',
      'approveReplay',
      '--input',
      '{"approvedBy":"m","reason":"r"}',
    ]);

    // The documented path: a decision recorded in the ledger (npm run ops), carried by the CLI through the codec
    // endpoint, which encrypts what the CLI sends (and the token keeps it to operators).
    const codec = await startCodecServer({
      codecs: new Map([
        [eu.config.namespace, new EncryptionCodec([key], { namespace: eu.config.namespace, unencrypted: 'pass' })],
      ]),
      corsOrigins: ['http://127.0.0.1:8233'],
      authToken: 'operator-token',
    });
    try {
      const viaCodec = (args: string[]) =>
        plain([...args, '--codec-endpoint', codec.url, '--codec-auth', 'Bearer operator-token']);
      const [holdToDiscard, holdToApprove] = night.expired.map((h) => h.id) as [string, string];
      const recorded = await opsJson(eu, key, [
        'discard',
        holdToDiscard,
        '--by',
        'grace',
        '--reason',
        'duplicate of OPS-12',
        '--record-only',
      ]);
      expect(recorded).toMatchObject({ outcome: 'recorded', workflowId: toDiscard, signal: 'discard' });
      // Recorded, not sent: the workflow still waits.
      expect((await eu.client.workflow.getHandle(toDiscard).query(statusQuery)).stage).toBe('quarantined');
      const discarded = await viaCodec([
        'update',
        'execute',
        '--workflow-id',
        toDiscard,
        '--name',
        'discard',
        '--input',
        JSON.stringify(recorded.input),
      ]);
      expect(discarded, discarded.stderr).toMatchObject({ code: 0 });
      expect(discarded.stdout).toMatch(/discarded/);
      harness.merchants.script(rejecting, { secrets: [night.secrets.get(rejecting)!], responses: [{ status: 200 }] });
      const webhookOf = async (holdId: string) =>
        (
          await eu.pool.query<{ webhook_id: string }>('SELECT webhook_id FROM webhook_deliveries WHERE hold_id = $1', [
            holdId,
          ])
        ).rows[0]!.webhook_id;
      const preview = await opsJson(eu, key, [
        'replay',
        'preview',
        '--webhook',
        await webhookOf(holdToApprove),
        '--requested-by',
        'alice',
      ]);
      const approval = await opsJson(eu, key, ['replay', 'approve', preview.id, '--by', 'bob', '--record-only']);
      expect(approval.recordOnly).toMatchObject({ workflowIds: [toApprove], signal: 'approveReplay' });
      const batch = await viaCodec([
        'signal',
        '--query',
        `WorkflowId = "${toApprove}"`,
        '--name',
        'approveReplay',
        '--input',
        JSON.stringify(approval.recordOnly.input),
        '--reason',
        'OPS-12 replay',
        '--yes',
      ]);
      expect(batch, batch.stderr).toMatchObject({ code: 0 });
      expect(await eu.client.workflow.getHandle(toDiscard).result()).toMatchObject({
        delivery: { status: 'discarded' },
      });
      expect(await eu.client.workflow.getHandle(toApprove).result()).toMatchObject({
        delivery: { status: 'delivered', policyRuns: 2 },
      });
      const decided = await eu.pool.query(
        `SELECT d.hold_id, x.decision, x.decided_by, x.reason FROM delivery_decisions x JOIN webhook_deliveries d USING (webhook_id)
          WHERE d.hold_id = ANY($1::text[]) ORDER BY x.decision`,
        [[holdToDiscard, holdToApprove]],
      );
      expect(decided.rows).toEqual([
        { hold_id: holdToDiscard, decision: 'discard', decided_by: 'grace', reason: 'duplicate of OPS-12' },
        { hold_id: holdToApprove, decision: 'replay', decided_by: 'bob', reason: `replay request ${preview.id}` },
      ]);

      // The discard, lifted as the server stores it (encrypted) from the first hold's history and sent to the third
      // with no key and no token: refused by the ledger, with why; the third still waits.
      const accepted = (await eu.client.workflow.getHandle(toDiscard).fetchHistory()).events!.find(
        (e) => e.workflowExecutionUpdateAcceptedEventAttributes,
      )!.workflowExecutionUpdateAcceptedEventAttributes!;
      const lifted = accepted.acceptedRequest!.input!.args!.payloads![0]!;
      const meta = Object.entries(lifted.metadata ?? {}).flatMap(([k, v]) => [
        '--input-meta',
        `${k}=${Buffer.from(v as Uint8Array).toString()}`,
      ]);
      const replayed = await plain([
        'signal',
        '--workflow-id',
        victim,
        '--name',
        'discard',
        ...meta,
        '--input-base64',
        '--input',
        Buffer.from(lifted.data as Uint8Array).toString('base64'),
      ]);
      expect(replayed, replayed.stderr).toMatchObject({ code: 0 });
      const victimHandle = eu.client.workflow.getHandle(victim);
      await expect
        .poll(async () => (await victimHandle.query(statusQuery)).ignoredSignals.map((i) => i.why), { timeout: 10_000 })
        .toEqual([
          expect.stringMatching(/^approveReplay refused: the payload was not encrypted/),
          // The reason is kept to its first 200 characters, whoever sent it.
          expect.stringContaining(
            `decision ${recorded.input.decisionId} is for webhook ${await webhookOf(holdToDiscard)}, not wh_`,
          ),
        ]);
      // And one minted through the codec endpoint in an operator's name, naming no decision: refused by the workflow
      // before anything is asked of the ledger.
      const forged = await viaCodec([
        'signal',
        '--workflow-id',
        victim,
        '--name',
        'discard',
        '--input',
        '{"by":"bob-the-approver","reason":"forged"}',
      ]);
      expect(forged, forged.stderr).toMatchObject({ code: 0 });
      await expect
        .poll(async () => (await victimHandle.query(statusQuery)).ignoredSignals.at(-1)?.why, { timeout: 10_000 })
        .toMatch(/^discard names no decision in the ledger/);
      expect((await victimHandle.query(statusQuery)).stage).toBe('quarantined');
      const victimRows = await eu.pool.query(
        `SELECT d.status, (SELECT count(*)::int FROM delivery_decisions x WHERE x.webhook_id = d.webhook_id) AS decisions
           FROM webhook_deliveries d WHERE d.hold_id = $1`,
        [victimHold],
      );
      expect(victimRows.rows).toEqual([{ status: 'quarantined', decisions: 0 }]);
    } finally {
      await codec.stop();
    }
  });
});

describe('four eyes in production', () => {
  const key = { id: 'k3', key: randomBytes(32) };
  let us: TestRegion;
  beforeAll(async () => {
    us = await harness.region('us', { payloadKeys: [key] });
    await harness.startWorker(us, undefined, undefined, { fourEyes: true });
  });

  /** `npm run ops -- ...` in production mode against this region. */
  const productionOps = (work: (ops: Ops, lines: string[]) => Promise<void>) => withOps(us, 'production', work, key);

  it('an approval without a replay request is refused (Update) or ignored with why (signal); a request is approved only by someone else, whatever the case or width', async () => {
    const { night, rejecting, workflowIds } = await quarantinedNight(us, `${harness.id}t3a`, 1);
    const handle = us.client.workflow.getHandle(workflowIds[0]!);
    // A decision recorded in the ledger (the break-glass CLI's way), but no replay request: four eyes refuses it.
    const recorded = await recordedDecision(us.pool, night.expired[0]!.id, 'approveReplay', 'bob', 'fixed');
    const refused = await handle.executeUpdate(approveReplayUpdate, { args: [recorded] }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
    expect((refused as WorkflowUpdateFailedError).cause?.message).toMatch(
      /^four eyes: an approval needs a replay request approved by a second person/,
    );
    await handle.signal(approveReplaySignal, recorded);
    await expect
      .poll(async () => (await handle.query(statusQuery)).ignoredSignals.map((s) => s.why), { timeout: 10_000 })
      .toEqual([expect.stringMatching(/^four eyes/)]);
    const history = await handle.fetchHistory();
    expect(history.events!.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toEqual([]);
    expect((await handle.query(statusQuery)).stage).toBe('quarantined');

    const webhookId = (
      await us.pool.query<{ webhook_id: string }>('SELECT webhook_id FROM webhook_deliveries WHERE hold_id = $1', [
        night.expired[0]!.id,
      ])
    ).rows[0]!.webhook_id;
    await productionOps(async (ops, lines) => {
      await expect(ops('approve', night.expired[0]!.id, '--by', 'bob', '--reason', 'fixed')).rejects.toMatchObject({
        code: 'FourEyesRequired',
      });
      expect(await ops('replay', 'preview', '--webhook', webhookId, '--requested-by', 'alice')).toBe(0);
      const requestId = /replay request (rr_\w+): 1 quarantined/.exec(lines.pop()!)![1]!;
      for (const same of [' ALICE ', 'Alice', 'ａｌｉｃｅ', '\u00a0alice\t']) {
        await expect(ops('replay', 'approve', requestId, '--by', same)).rejects.toMatchObject({
          code: 'SelfApprovalRefused',
        });
      }
      // The ledger refuses it too, whoever writes the row.
      await expect(
        us.pool.query(
          `UPDATE replay_requests SET status = 'approved', approved_by = 'ＡＬＩＣＥ ', approved_at = now() WHERE id = $1`,
          [requestId],
        ),
      ).rejects.toThrow(/replay_requests_four_eyes/);
      harness.merchants.script(rejecting, { secrets: [night.secrets.get(rejecting)!], responses: [{ status: 200 }] });
      expect(await ops('replay', 'approve', requestId, '--by', 'bob')).toBe(0);
      expect(lines.pop()).toMatch(/1 replay\(s\) applied/);
    });
    expect(await handle.result()).toMatchObject({ delivery: { status: 'delivered', policyRuns: 2 } });
  });

  it('an event skip needs a skip request approved by a second person: a raw skip signal is refused by the ledger check', async () => {
    const night = await seedNight(us.pool, 'us', `${harness.id}t3b`, { expired: 0, future: 1 }, harness.merchants);
    const holdId = night.future[0]!.id;
    const receiver = await startTestReceiver(us, { gapWaitMs: 1_000 });
    try {
      const reversal = { eventId: `evt_${holdId}_2`, holdId, sequence: 2, type: 'hold.reversed' as const };
      expect((await receiver.processor.send(reversal)).status).toBe(202);
      const handle = us.client.workflow.getHandle(holdEventsWorkflowId('us', holdId));
      // The receiver answers 202 once the event is recorded, before it hands it to the workflow: it may not exist yet.
      const stopped = async () =>
        handle.query(holdEventsStatusQuery).then(
          (status) => status.stage.stage === 'stopped_for_human',
          (err: unknown) => (err instanceof WorkflowNotFoundError ? false : Promise.reject(err)),
        );
      await waitUntil(stopped, 'the hold stops at the gap');

      // One person's skip, as the `temporal` CLI (or a bug) would send it: the worker's activity checks the ledger
      // first.
      await handle.signal(skipMissingEventSignal, { sequence: 1, by: 'alice', reason: 'never issued' });
      // Refused: nothing recorded, and the workflow goes back to waiting for the gap (a new gap timer fires) and stops.
      const refusedAndStoppedAgain = async () => {
        const events = (await handle.fetchHistory()).events ?? [];
        const tried = events.findIndex(
          (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'skipProcessorSequence',
        );
        return tried !== -1 && events.slice(tried).some((e) => e.timerFiredEventAttributes) && (await stopped());
      };
      await waitUntil(refusedAndStoppedAgain, 'the refused skip is tried and the workflow stops at the gap again');
      const { rows: skips } = await us.pool.query('SELECT 1 FROM processor_sequence_skips WHERE hold_id = $1', [
        holdId,
      ]);
      expect(skips).toEqual([]);
      expect((await holdStates(us.pool)).get(holdId)?.state).toBe('active');

      await productionOps(async (ops, lines) => {
        expect(
          await ops(
            'events',
            'skip',
            holdId,
            '--sequence',
            '1',
            '--by',
            'alice',
            '--reason',
            'processor: never issued',
          ),
        ).toBe(0);
        const requestId = /skip request (sr_\w+) recorded/.exec(lines.pop()!)![1]!;
        await expect(ops('events', 'approve-skip', requestId, '--by', 'ALICE')).rejects.toMatchObject({
          code: 'SelfApprovalRefused',
        });
        expect(await ops('events', 'approve-skip', requestId, '--by', 'bob')).toBe(0);
      });
      await waitUntil(
        async () => (await holdStates(us.pool)).get(holdId)?.state === 'reversed',
        'the reversal applies after the approved skip',
      );
      const { rows: recorded } = await us.pool.query(
        'SELECT skipped_by FROM processor_sequence_skips WHERE hold_id = $1',
        [holdId],
      );
      expect(recorded).toEqual([{ skipped_by: 'bob' }]);
    } finally {
      await receiver.close();
    }
  });
});

describe('identities', () => {
  it("the CLI's key and the ledger's identity_key() agree on every case, width and space", async () => {
    const r = await harness.region('us');
    const names = [
      'alice',
      ' Alice ',
      'ALICE',
      'ａｌｉｃｅ',
      '\u00a0alice\t',
      '\u3000Alice\u2028',
      'İlker',
      'ΟΔΟΣ',
      'Straße',
      'ﬁnn',
      'bob@Example.COM',
      'Ǆemal',
    ];
    const { rows } = await r.pool.query<{ who: string; key: string }>(
      'SELECT who, identity_key(who) AS key FROM unnest($1::text[]) AS who',
      [names],
    );
    expect(rows.map((row) => row.key)).toEqual(names.map(identityKey));
    expect(new Set(names.slice(0, 6).map(identityKey))).toEqual(new Set(['alice']));
  });
});
