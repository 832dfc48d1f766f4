/**
 * Payload encryption: what the server stores is ciphertext; the codec endpoint decodes it for the Web UI;
 * recorded encrypted histories replay; keys rotate without orphaning old histories; tampering is detected.
 */
import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startCodecServer } from '../../src/codec/codec-server.js';
import {
  dataConverterFor,
  EncryptionCodec,
  ENCRYPTED_ENCODING,
  FAILURE_CONVERTER_PATH,
  PayloadDecryptionFailed,
  UnknownEncryptionKey,
} from '../../src/codec/encryption-codec.js';
import { startTracing, workflowSinks, type Tracing } from '../../src/observability/tracing.js';
import { sweepExpiredHolds } from '../../src/workflows/sweep-expired-holds.js';
import { openHarness, type Harness, type TestRegion } from '../support/harness.js';
import { seedNight, type Night } from '../support/ledger.js';
import { captureThroughReceiver } from '../support/processor.js';
import { encryptedGoldenSets, replayFailures } from '../support/golden.js';
import { SERVER_SIDE_CAUSES } from '../../bench/chaos-run.js';

const key1 = { id: 'k1', key: randomBytes(32) };
/** How the codec endpoint and a client read the test region's payloads. */
const EU_READER = { namespace: 'hold-sweeper-eu', unencrypted: 'pass' } as const;
/** What a rejecting merchant answers: neither it nor the failure it causes may be in clear in a history. */
const REJECTION_BODY = '{"error":"iban DE89370400440532013000 unknown"}';
const key2 = { id: 'k2', key: randomBytes(32) };

let harness: Harness;
let eu: TestRegion;
let tracing: Tracing;
let night: Night;
let raw: Client;

/**
 * Every payload stored in the histories of the region's task queue, as the server has it. Not counted: search
 * attributes (the server indexes them: identifiers by design, never amounts) and a local activity marker's
 * `data` detail (the SDK's own bookkeeping: sequence, attempt, activity type, times); the marker's result is.
 */
/** The header @temporalio/interceptors-opentelemetry carries a span's context in. */
const TRACE_HEADER = '_tracer-data';
/** Every trace header the histories held, decoded. */
const traceHeaders: Record<string, string>[] = [];

async function storedPayloads(): Promise<Payload[]> {
  const payloads: Payload[] = [];
  traceHeaders.length = 0;
  const collect = (value: unknown, path = ''): void => {
    if (!value || typeof value !== 'object') return;
    if ('metadata' in value && 'data' in value && (value as Payload).metadata?.encoding) {
      payloads.push(value as Payload);
      return;
    }
    for (const [key, child] of Object.entries(value)) {
      // A local activity's marker data, and a patch marker's (its patch id, written by the SDK's core): bookkeeping.
      const bookkeeping =
        (key === 'data' || key === 'patch-data') && path.endsWith('markerRecordedEventAttributes.details');
      // The trace context (src/observability/tracing.ts) rides in a header the codec does not encode: it must carry
      // the W3C trace context and nothing else.
      if (key === TRACE_HEADER && path.endsWith('header.fields')) {
        traceHeaders.push(JSON.parse(Buffer.from((child as Payload).data!).toString()) as Record<string, string>);
        continue;
      }
      if (key !== 'searchAttributes' && !bookkeeping) collect(child, `${path}.${key}`);
    }
  };
  for await (const { history } of raw.workflow
    .list({ query: `TaskQueue = '${eu.config.taskQueue}'` })
    .intoHistories()) {
    for (const event of (history as temporal.api.history.v1.IHistory).events ?? []) collect(event);
  }
  return payloads;
}

beforeAll(async () => {
  harness = await openHarness();
  eu = await harness.region('eu', { payloadKeys: [key1] });
  await harness.startWorker(eu);
  night = await seedNight(eu.pool, 'eu', `${harness.id}enc`, { expired: 3, future: 1 }, harness.merchants);
  // One merchant fails, then rejects with a body: the regular activity's failure (its message names the status) the
  // history must not hold in clear. (The first attempt's failure is its release's answer, a payload.)
  const rejecting = night.merchantIds[1]!;
  harness.merchants.script(rejecting, {
    secrets: [night.secrets.get(rejecting)!],
    responses: [{ status: 503 }, { status: 400, body: REJECTION_BODY }],
  });
  await eu.client.workflow.execute(sweepExpiredHolds, {
    taskQueue: eu.config.taskQueue,
    workflowId: `sweep-eu-${harness.id}-enc`,
    args: [{ region: 'eu', releaseWaitMs: 60_000 }],
  });
  // A processor capture through the region's receiver (its client encrypts like the workers): its signal, its hold's
  // event workflow and its webhook's delivery workflow are payloads too, traced as production's are (a tracer
  // provider registered, its spans dropped): the trace context rides in their headers.
  tracing = startTracing('hold-sweeper-test', { sampleRatio: 1 });
  await captureThroughReceiver(eu, night.future[0]!.id, 'EUR');
  // A client with no codec sees exactly what the server stores.
  raw = new Client({
    connection: await Connection.connect({ address: harness.address }),
    namespace: eu.config.namespace,
  });
});
afterAll(async () => {
  await raw?.connection.close();
  await harness?.close();
  await tracing?.shutdown();
});

describe('payload encryption', () => {
  it('residency: failure messages and stack traces in history are encoded payloads, never clear text', async () => {
    const failures: { message?: string | null; stackTrace?: string | null; encodedAttributes?: Payload | null }[] = [];
    let raw_json = '';
    await expect
      .poll(
        async () => {
          failures.length = 0;
          raw_json = '';
          for await (const { history } of raw.workflow
            .list({ query: `TaskQueue = '${eu.config.taskQueue}'` })
            .intoHistories()) {
            raw_json += JSON.stringify(history);
            const visit = (value: unknown): void => {
              if (!value || typeof value !== 'object') return;
              // A workflow task the server failed itself (a signal arriving as the task completed the workflow, say)
              // carries the server's words only, never ours.
              const failedTask = (value as temporal.api.history.v1.IHistoryEvent).workflowTaskFailedEventAttributes;
              if (failedTask && SERVER_SIDE_CAUSES.has(failedTask.cause ?? 0)) return;
              for (const [key, child] of Object.entries(value)) {
                if ((key === 'failure' || key === 'cause') && child && typeof child === 'object' && 'message' in child)
                  failures.push(child);
                visit(child);
              }
            };
            visit(history);
          }
          return failures.length;
        },
        { timeout: 15_000 },
      )
      .toBeGreaterThan(0);
    for (const failure of failures) {
      expect(failure.message).toBe('Encoded failure');
      expect(failure.stackTrace ?? '').toBe('');
      expect(Buffer.from(failure.encodedAttributes!.metadata!.encoding!).toString()).toBe(ENCRYPTED_ENCODING);
    }
    expect(raw_json).not.toContain('DE89370400440532013000');
    expect(raw_json).not.toContain('HTTP 400');
  });

  it('the server stores no plaintext hold id or amount in any payload; the codec endpoint decodes them', async () => {
    let payloads: Payload[] = [];
    await expect
      .poll(
        async () => {
          payloads = await storedPayloads();
          return payloads.length;
        },
        { timeout: 15_000 },
      )
      .toBeGreaterThan(10);
    const hold = night.expired[0]!;
    const captured = night.future[0]!;
    expect(traceHeaders.length).toBeGreaterThan(0);
    for (const header of traceHeaders) {
      expect(Object.keys(header).filter((k) => k !== 'traceparent' && k !== 'tracestate')).toEqual([]);
      expect(header.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
    }
    for (const payload of payloads) {
      expect(Buffer.from(payload.metadata!.encoding!).toString()).toBe(ENCRYPTED_ENCODING);
      const bytes = Buffer.from(payload.data!);
      expect(bytes.includes(hold.id)).toBe(false);
      expect(bytes.includes(String(hold.amountMinor))).toBe(false);
      expect(bytes.includes(captured.id)).toBe(false);
    }
    // The processor-event workflows were among them.
    const types = new Set<string>();
    for await (const execution of raw.workflow.list({ query: `TaskQueue = '${eu.config.taskQueue}'` }))
      types.add(execution.type);
    expect([...types]).toEqual(expect.arrayContaining(['applyHoldEvents', 'deliverHoldEvent']));

    const codecs = new Map([[eu.config.namespace, new EncryptionCodec([key1], EU_READER)]]);
    const server = await startCodecServer({
      codecs,
      corsOrigins: ['http://127.0.0.1:8233'],
      authToken: 'secret-token',
    });
    try {
      const body = JSON.stringify({
        payloads: payloads.map((p) => ({
          metadata: Object.fromEntries(
            Object.entries(p.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
          ),
          data: Buffer.from(p.data!).toString('base64'),
        })),
      });
      const post = (headers: Record<string, string>) =>
        fetch(`${server.url}/decode`, {
          method: 'POST',
          body,
          headers: { 'Content-Type': 'application/json', 'X-Namespace': eu.config.namespace, ...headers },
        });
      expect((await post({})).status).toBe(401);
      const response = await post({ Authorization: 'Bearer secret-token', Origin: 'http://127.0.0.1:8233' });
      expect(response.status).toBe(200);
      expect(response.headers.get('access-control-allow-origin')).toBe('http://127.0.0.1:8233');
      const decoded = (await response.json()) as { payloads: { metadata: Record<string, string>; data: string }[] };
      const plain = decoded.payloads.map((p) => Buffer.from(p.data, 'base64').toString('utf8')).join('\n');
      expect(plain).toContain(hold.id);
      expect(plain).toContain(`"amountMinor":"${hold.amountMinor}"`);
      const preflight = await fetch(`${server.url}/decode`, { method: 'OPTIONS' });
      expect(preflight.headers.get('access-control-allow-headers')).toContain('X-Namespace');
    } finally {
      await server.stop();
    }
  });

  it('recorded encrypted histories replay with the codec', async () => {
    // Every run: the completed holds, the quarantined one still waiting (its failure encoded), both sweep runs.
    const histories = raw.workflow.list({ query: `TaskQueue = '${eu.config.taskQueue}'` }).intoHistories();
    const results: { workflowId: string; error?: unknown }[] = [];
    for await (const result of Worker.runReplayHistories(
      {
        workflowBundle: { code: inject('workflowBundleCode') },
        sinks: workflowSinks(),
        dataConverter: dataConverterFor({ namespace: eu.config.namespace, payloadKeys: [key1] }, 'refuse'),
      },
      histories,
    )) {
      results.push(result);
    }
    expect(results.length).toBeGreaterThanOrEqual(5);
    expect(results.filter((r) => r.error)).toEqual([]);
  });

  it('every committed encrypted history of a supported release still decodes with the current codec, and replays', async () => {
    const sets = encryptedGoldenSets();
    expect(sets.map((set) => set.release)).toContain('1.0.0');
    for (const set of sets) {
      const codec = new EncryptionCodec([set.key], { namespace: set.namespace, unencrypted: 'refuse' });
      const sealed: Payload[] = [];
      const collect = (value: unknown): void => {
        if (!value || typeof value !== 'object') return;
        const metadata = (value as Payload).metadata;
        if (metadata?.encoding && Buffer.from(metadata.encoding).toString() === ENCRYPTED_ENCODING)
          sealed.push(value as Payload);
        else for (const child of Object.values(value)) collect(child);
      };
      for (const { history } of set.histories) collect(history);
      expect(sealed.length).toBeGreaterThan(50);
      const decoded = await codec.decode(sealed);
      expect(decoded.every((p) => Buffer.from(p.metadata!.encoding!).toString() !== ENCRYPTED_ENCODING)).toBe(true);
      expect(
        await replayFailures({ code: inject('workflowBundleCode') }, set.histories, {
          payloadCodecs: [codec],
          failureConverterPath: FAILURE_CONVERTER_PATH,
        }),
      ).toEqual([]);
      // A payload stripped of the binding's name is refused, not decoded without it.
      const { [`encryption-aad`]: _bound, ...unbound } = sealed[0]!.metadata!;
      await expect(codec.decode([{ ...sealed[0]!, metadata: unbound }])).rejects.toThrow(PayloadDecryptionFailed);
    }
  });

  it('after rotation, new payloads use the new key and histories written under the old one still decode', async () => {
    const old = await storedPayloads();
    const rotated = new EncryptionCodec([key2, key1], EU_READER);
    const [fresh] = await rotated.encode([
      { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('"x"') },
    ]);
    expect(Buffer.from(fresh!.metadata!['encryption-key-id']!).toString()).toBe('k2');
    const decoded = await rotated.decode(old);
    expect(decoded.some((p) => Buffer.from(p.data!).toString().includes(night.expired[0]!.id))).toBe(true);
    // Retire key 1 too early and the old histories cannot be read: a named error, not garbage.
    await expect(new EncryptionCodec([key2], EU_READER).decode(old.slice(0, 1))).rejects.toBeInstanceOf(
      UnknownEncryptionKey,
    );
  });

  it('a tampered payload fails decoding with a clear error', async () => {
    const codec = new EncryptionCodec([key1], EU_READER);
    const [sealed] = await codec.encode([
      { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('{"amountMinor":"1250"}') },
    ]);
    const tampered = Buffer.from(sealed!.data!);
    tampered[20] = tampered[20]! ^ 0x01;
    await expect(codec.decode([{ ...sealed!, data: tampered }])).rejects.toThrow(PayloadDecryptionFailed);
    await expect(codec.decode([{ ...sealed!, data: tampered }])).rejects.toThrow(/k1.*altered/);
    expect(Buffer.from((await codec.decode([sealed!]))[0]!.data!).toString()).toBe('{"amountMinor":"1250"}');
  });
});
