/**
 * The payload codec without a server: what an encrypted payload carries, that keys rotate, that a wrong key or
 * altered bytes fail with the named errors, and that the keys loadConfig parses from PAYLOAD_KEYS_<R> are the
 * ones the codec uses. test/integration/encryption.test.ts checks what the server stores, the codec endpoint
 * and replay.
 */
import { createCipheriv, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { ApplicationFailure, defaultPayloadConverter, type FailureConverter, type Payload } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import {
  dataConverterFor,
  EncryptionCodec,
  ENCRYPTED_ENCODING,
  PayloadDecryptionFailed,
  UnknownEncryptionKey,
} from '../../src/codec/encryption-codec.js';
import { loadConfig } from '../../src/config.js';
import type { EncryptionKey } from '../../src/crypto/key-ring.js';
import { isRefusedUnencrypted, UNENCRYPTED_REFUSED } from '../../src/contracts/unencrypted.js';
import { ConfigError } from '../../src/errors.js';

const k1: EncryptionKey = { id: 'k1', key: randomBytes(32) };
const k2: EncryptionKey = { id: 'k2', key: randomBytes(32) };

/** IV first, GCM tag last (src/crypto/key-ring.ts). */
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The namespace the tests' codecs bind to, and how a reader (codec endpoint, client) or a worker decodes. */
const US = 'hold-sweeper-us';
const READER = { namespace: US, unencrypted: 'pass' } as const;
const WORKER = { namespace: US, unencrypted: 'refuse' } as const;

const HOLD = { holdId: 'hold_01J9Z8Q4', merchantId: 'm_berlin_bakery', amountMinor: '1250' };

const text = (bytes: Uint8Array | null | undefined) => Buffer.from(bytes ?? new Uint8Array()).toString('utf8');
const metadataOf = (payload: Payload) =>
  Object.fromEntries(Object.entries(payload.metadata ?? {}).map(([k, v]) => [k, text(v)]));

async function encodeOne(codec: EncryptionCodec, value: unknown = HOLD): Promise<Payload> {
  const [sealed] = await codec.encode([defaultPayloadConverter.toPayload(value)]);
  return sealed!;
}

async function decodeValue(codec: EncryptionCodec, payload: Payload): Promise<unknown> {
  const [plain] = await codec.decode([payload]);
  return defaultPayloadConverter.fromPayload(plain!);
}

/** The sealed payload with byte `index` of its data flipped (a negative index counts from the end). */
function flipped(payload: Payload, index: number): Payload {
  const data = Buffer.from(payload.data!);
  const at = index < 0 ? data.length + index : index;
  data[at] = data[at]! ^ 0x01;
  return { ...payload, data };
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

describe('EncryptionCodec', () => {
  it('round-trips Temporal payloads, several in one call, metadata and data intact', async () => {
    const codec = new EncryptionCodec([k1], READER);
    const inputs = [
      defaultPayloadConverter.toPayload(HOLD),
      defaultPayloadConverter.toPayload('hold_01J9Z8Q4'),
      defaultPayloadConverter.toPayload(undefined),
    ];
    const sealed = await codec.encode(inputs);
    expect(sealed).toHaveLength(3);
    const decoded = await codec.decode(sealed);
    expect(decoded.map(metadataOf)).toEqual(inputs.map(metadataOf));
    expect(decoded.map((p) => text(p.data))).toEqual(inputs.map((p) => text(p.data)));
    expect(defaultPayloadConverter.fromPayload(decoded[0]!)).toEqual(HOLD);
    expect(defaultPayloadConverter.fromPayload(decoded[2]!)).toBeUndefined();
  });

  it('seals the whole payload: the key id and cipher in the metadata, no plaintext and no original metadata left', async () => {
    const sealed = await encodeOne(new EncryptionCodec([k1], READER));
    expect(metadataOf(sealed)).toEqual({
      encoding: ENCRYPTED_ENCODING,
      'encryption-cipher': 'AES-256-GCM',
      'encryption-key-id': 'k1',
      'encryption-aad': 'namespace,key-id',
    });
    const data = Buffer.from(sealed.data!);
    for (const plain of [HOLD.holdId, HOLD.merchantId, HOLD.amountMinor, 'json/plain'])
      expect(data.includes(plain)).toBe(false);
    const plainLength = Buffer.from(defaultPayloadConverter.toPayload(HOLD).data!).length;
    expect(data.length).toBeGreaterThan(IV_BYTES + plainLength + TAG_BYTES);
  });

  it('uses a fresh IV per payload: the same value never gives the same ciphertext', async () => {
    const codec = new EncryptionCodec([k1], READER);
    const sealed = [
      await encodeOne(codec),
      await encodeOne(codec),
      ...(await codec.encode([defaultPayloadConverter.toPayload(HOLD), defaultPayloadConverter.toPayload(HOLD)])),
    ];
    const ivs = sealed.map((p) => Buffer.from(p.data!).subarray(0, IV_BYTES).toString('hex'));
    const bodies = sealed.map((p) => Buffer.from(p.data!).toString('hex'));
    expect(new Set(ivs).size).toBe(4);
    expect(new Set(bodies).size).toBe(4);
    for (const p of sealed) expect(await decodeValue(codec, p)).toEqual(HOLD);
  });

  it('a reader leaves payloads that were never encrypted as they are (histories from before encryption was turned on)', async () => {
    const plain = defaultPayloadConverter.toPayload(HOLD);
    const [decoded] = await new EncryptionCodec([k1], READER).decode([plain]);
    expect(decoded).toBe(plain);
  });

  it("a worker refuses them: they decode to the refusal marker, never to the sender's value, and never throw", async () => {
    const worker = new EncryptionCodec([k1], WORKER);
    const plainDecision = defaultPayloadConverter.toPayload({ approvedBy: 'mallory', reason: 'because' });
    const decoded = await worker.decode([plainDecision, defaultPayloadConverter.toPayload(undefined)]);
    const values = decoded.map((p) => defaultPayloadConverter.fromPayload(p));
    expect(values).toEqual([
      { [UNENCRYPTED_REFUSED]: { namespace: US, encoding: 'json/plain' } },
      { [UNENCRYPTED_REFUSED]: { namespace: US, encoding: 'binary/null' } },
    ]);
    expect(values.every(isRefusedUnencrypted)).toBe(true);
    expect(JSON.stringify(values)).not.toContain('mallory');
    // What the worker's own clients encrypted still decodes to the value.
    expect(await decodeValue(worker, await encodeOne(new EncryptionCodec([k1], READER)))).toEqual(HOLD);
  });

  it('binds each ciphertext to its namespace: a payload moved to another namespace that shares the key is refused', async () => {
    const sealed = await encodeOne(new EncryptionCodec([k1], READER));
    const err = await rejection(
      new EncryptionCodec([k1], { namespace: 'hold-sweeper-eu', unencrypted: 'refuse' }).decode([sealed]),
    );
    expect(err).toBeInstanceOf(PayloadDecryptionFailed);
    expect(err.message).toContain('hold-sweeper-eu');
    // Stripping the binding from its metadata does not help: the tag was computed over the namespace.
    const { 'encryption-aad': _binding, ...unbound } = sealed.metadata!;
    await expect(new EncryptionCodec([k1], READER).decode([{ ...sealed, metadata: unbound }])).rejects.toBeInstanceOf(
      PayloadDecryptionFailed,
    );
    // Nor does claiming a binding the codec does not know.
    const other = { ...sealed, metadata: { ...sealed.metadata, 'encryption-aad': Buffer.from('key-id') } };
    await expect(new EncryptionCodec([k1], READER).decode([other])).rejects.toBeInstanceOf(PayloadDecryptionFailed);
  });

  it('refuses ciphertext sealed without the binding (no associated data), as a tampered payload', async () => {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', k1.key, iv);
    const plain = temporal.api.common.v1.Payload.encode(defaultPayloadConverter.toPayload(HOLD)).finish();
    const unbound: Payload = {
      metadata: {
        encoding: Buffer.from(ENCRYPTED_ENCODING),
        'encryption-cipher': Buffer.from('AES-256-GCM'),
        'encryption-key-id': Buffer.from('k1'),
      },
      data: Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]),
    };
    await expect(new EncryptionCodec([k1], WORKER).decode([unbound])).rejects.toBeInstanceOf(PayloadDecryptionFailed);
  });

  it('after rotation (new key first) old payloads still decode and new ones use the new key', async () => {
    const before = await encodeOne(new EncryptionCodec([k1], READER));
    const rotated = new EncryptionCodec([k2, k1], READER);
    const after = await encodeOne(rotated, { ...HOLD, amountMinor: '990' });
    expect(metadataOf(after)['encryption-key-id']).toBe('k2');
    expect(await decodeValue(rotated, before)).toEqual(HOLD);
    expect(await decodeValue(rotated, after)).toEqual({ ...HOLD, amountMinor: '990' });
    // A worker not yet given the new key cannot read what a rotated one wrote: a named error, not garbage.
    const err = await rejection(new EncryptionCodec([k1], READER).decode([after]));
    expect(err).toBeInstanceOf(UnknownEncryptionKey);
    expect((err as UnknownEncryptionKey).keyId).toBe('k2');
  });

  it('refuses a payload under a key it does not have with UnknownEncryptionKey, naming the key and the fix', async () => {
    const sealed = await encodeOne(new EncryptionCodec([k1], READER));
    const err = await rejection(new EncryptionCodec([k2], READER).decode([sealed]));
    expect(err).toBeInstanceOf(UnknownEncryptionKey);
    // The class name is the Temporal failure type: part of the contract.
    expect(err.name).toBe('UnknownEncryptionKey');
    expect((err as UnknownEncryptionKey).keyId).toBe('k1');
    expect(err.message).toContain('"k1"');
    expect(err.message).toMatch(/keep old keys configured/);
    expect(err.message).not.toContain(k1.key.toString('base64'));

    const { 'encryption-key-id': _dropped, ...withoutKeyId } = sealed.metadata!;
    await expect(
      new EncryptionCodec([k1], READER).decode([{ ...sealed, metadata: withoutKeyId }]),
    ).rejects.toBeInstanceOf(UnknownEncryptionKey);
  });

  it.each([
    ['a byte of the IV', 0],
    ['a byte of the ciphertext', IV_BYTES + 3],
    ['a byte of the GCM tag', -1],
  ])('detects %s altered with PayloadDecryptionFailed', async (_what, index) => {
    const codec = new EncryptionCodec([k1], READER);
    const sealed = await encodeOne(codec);
    const err = await rejection(codec.decode([flipped(sealed, index)]));
    expect(err).toBeInstanceOf(PayloadDecryptionFailed);
    expect(err.name).toBe('PayloadDecryptionFailed');
    expect((err as PayloadDecryptionFailed).keyId).toBe('k1');
    // The untouched payload still decodes: the codec holds no state that the failure broke.
    expect(await decodeValue(codec, sealed)).toEqual(HOLD);
  });

  it('rejects truncated data, and a payload relabelled with another configured key, with PayloadDecryptionFailed', async () => {
    const codec = new EncryptionCodec([k2, k1], READER);
    const sealed = await encodeOne(codec);
    const data = Buffer.from(sealed.data!);
    await expect(
      codec.decode([{ ...sealed, data: data.subarray(0, IV_BYTES + TAG_BYTES - 1) }]),
    ).rejects.toBeInstanceOf(PayloadDecryptionFailed);
    await expect(codec.decode([{ ...sealed, data: data.subarray(0, data.length - 1) }])).rejects.toBeInstanceOf(
      PayloadDecryptionFailed,
    );
    const relabelled = { ...sealed, metadata: { ...sealed.metadata, 'encryption-key-id': Buffer.from('k1') } };
    const err = await rejection(codec.decode([relabelled]));
    expect(err).toBeInstanceOf(PayloadDecryptionFailed);
    expect((err as PayloadDecryptionFailed).keyId).toBe('k1');
  });

  it('refuses to start without a key or with a key that is not 32 bytes', () => {
    expect(() => new EncryptionCodec([], READER)).toThrow(/at least one key/);
    expect(() => new EncryptionCodec([k1], { namespace: '', unencrypted: 'pass' })).toThrow(/namespace/);
    expect(() => new EncryptionCodec([k1, { id: 'short', key: randomBytes(16) }], READER)).toThrow(
      /"short" must be 32 bytes/,
    );
  });
});

describe('dataConverterFor', () => {
  it('has no codec without keys, and one EncryptionCodec sealing with the first key otherwise', async () => {
    expect(dataConverterFor({ namespace: US, payloadKeys: undefined }).payloadCodecs).toEqual([]);
    const converter = dataConverterFor({ namespace: US, payloadKeys: [k2, k1] });
    expect(converter.payloadCodecs).toHaveLength(1);
    const codec = converter.payloadCodecs[0]!;
    expect(codec).toBeInstanceOf(EncryptionCodec);
    const [sealed] = await codec.encode([defaultPayloadConverter.toPayload(HOLD)]);
    expect(metadataOf(sealed!)['encryption-key-id']).toBe('k2');
    expect(await decodeValue(new EncryptionCodec([k2], READER), sealed!)).toEqual(HOLD);
  });
});

describe('residency: failure messages and stacks are encrypted too', () => {
  it("the data converter of workers and clients encodes a failure's message and stack into a payload the codec seals", async () => {
    const { failureConverterPath, payloadCodecs } = dataConverterFor({ namespace: US, payloadKeys: [k1] });
    const { failureConverter } = createRequire(import.meta.url)(failureConverterPath) as {
      failureConverter: FailureConverter;
    };
    const excerpt = 'HTTP 400 from merchant m_1: {"error":"card 4111 1111 1111 1111 rejected"}';
    const failure = failureConverter.errorToFailure(
      ApplicationFailure.nonRetryable(excerpt, 'WebhookRejected'),
      defaultPayloadConverter,
    );
    expect(failure.message).toBe('Encoded failure');
    expect(failure.stackTrace).toBe('');
    expect(failure.applicationFailureInfo?.type).toBe('WebhookRejected');
    const [sealed] = await payloadCodecs[0]!.encode([failure.encodedAttributes!]);
    expect(Buffer.from(sealed!.data!).includes('4111')).toBe(false);
    // And back: whoever holds the key reads the real message.
    const [opened] = await payloadCodecs[0]!.decode([sealed!]);
    const restored = failureConverter.failureToError(
      { ...failure, encodedAttributes: opened },
      defaultPayloadConverter,
    );
    expect(restored.message).toBe(excerpt);
  });
});

describe('PAYLOAD_KEYS_<R> through loadConfig', () => {
  const b64 = (key: EncryptionKey) => key.key.toString('base64');

  it('gives each region its own keys, current first, byte for byte, for the codec to use', async () => {
    const config = loadConfig({
      PAYLOAD_KEYS_US: `k1:${b64(k1)}`,
      PAYLOAD_KEYS_EU: ` k2:${b64(k2)} , k1:${b64(k1).replace(/=+$/, '')}`,
    });
    const [us, eu] = config.regions;
    expect(us!.payloadKeys!.map((k) => [k.id, k.key.toString('hex')])).toEqual([['k1', k1.key.toString('hex')]]);
    expect(eu!.payloadKeys!.map((k) => [k.id, k.key.toString('hex')])).toEqual([
      ['k2', k2.key.toString('hex')],
      ['k1', k1.key.toString('hex')],
    ]);
    // A payload an old worker sealed under k1 decodes with the EU region's configured codec; new ones use k2.
    const euCodec = dataConverterFor(eu!).payloadCodecs[0] as EncryptionCodec;
    expect(
      await decodeValue(euCodec, await encodeOne(new EncryptionCodec([k1], { ...READER, namespace: eu!.namespace }))),
    ).toEqual(HOLD);
    expect(metadataOf(await encodeOne(euCodec))['encryption-key-id']).toBe('k2');
    // Unset in dev: payloads are not encrypted.
    expect(loadConfig({}).regions.map((r) => r.payloadKeys)).toEqual([undefined, undefined]);
  });

  const secret = b64(k1);
  it.each([
    ['a key of 16 bytes', `k1:${randomBytes(16).toString('base64')}`],
    ['a key of 33 bytes', `k1:${randomBytes(33).toString('base64')}`],
    ['a key that is not base64', `k1:${secret.slice(0, -4)}!@#$`],
    ['a key with trailing garbage', `k1:${secret}xyz`],
    ['an empty id', `:${secret}`],
    ['an id with a space', `bad id:${secret}`],
    ['a key without its id', secret],
    ['an empty second entry', `k1:${secret},`],
    ['a repeated id', `k1:${secret},k1:${b64(k2)}`],
  ])('refuses %s with a ConfigError that names PAYLOAD_KEYS_EU and never echoes the key', (_what, raw) => {
    let err: unknown;
    try {
      loadConfig({ HOLD_SWEEPER_REGIONS: 'eu', PAYLOAD_KEYS_EU: raw });
    } catch (caught) {
      err = caught;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const configError = err as ConfigError;
    expect(configError.variable).toBe('PAYLOAD_KEYS_EU');
    expect(configError.message).toContain('PAYLOAD_KEYS_EU');
    expect(configError.value).toBe('(redacted)');
    // No stretch of any key in the value, not even a fragment, reaches the message.
    for (const part of raw.split(/[,:]/).filter((p) => p.length >= 8)) {
      for (let i = 0; i + 8 <= part.length; i += 4) expect(configError.message).not.toContain(part.slice(i, i + 8));
    }
  });
});
