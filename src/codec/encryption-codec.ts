/**
 * Payload encryption for Temporal: workflow and activity inputs and results (hold ids, amounts, merchant ids,
 * payload excerpts) are encrypted by the worker and the clients before they leave the process, so a shared or
 * hosted Temporal server stores only ciphertext. EU keys stay with EU workers: each region has its own keys.
 *
 * AES-256-GCM, a fresh 96-bit IV per payload; the key id travels in the payload's metadata so keys can rotate:
 * new payloads use the current (first) key, old histories decode while their key is still configured.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Payload, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import type { EncryptionKey } from '../config.js';

// A CommonJS package: Node's ESM loader cannot see its named exports.
const { temporal } = proto;

export const ENCRYPTED_ENCODING = 'binary/encrypted';
const KEY_ID_METADATA = 'encryption-key-id';
const CIPHER_METADATA = 'encryption-cipher';
const CIPHER = 'AES-256-GCM';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A payload names a key this process does not have (rotated out too early, or another region's). */
export class UnknownEncryptionKey extends Error {
  override readonly name = 'UnknownEncryptionKey';
  constructor(readonly keyId: string) {
    super(`payload was encrypted with key "${keyId}", which is not configured here; keep old keys configured until their histories are gone`);
  }
}

/** Ciphertext that does not authenticate: tampered with, truncated, or encrypted under another key. */
export class PayloadDecryptionFailed extends Error {
  override readonly name = 'PayloadDecryptionFailed';
  constructor(readonly keyId: string) {
    super(`payload under key "${keyId}" failed authentication (AES-256-GCM): it was altered or is not ours`);
  }
}

const text = (value: string) => new TextEncoder().encode(value);
const fromText = (value: Uint8Array | null | undefined) => (value ? new TextDecoder().decode(value) : undefined);

export class EncryptionCodec implements PayloadCodec {
  private readonly byId: Map<string, Buffer>;
  private readonly current: EncryptionKey;

  /** `keys[0]` encrypts; every key decrypts. */
  constructor(keys: readonly EncryptionKey[]) {
    if (keys.length === 0) throw new Error('EncryptionCodec needs at least one key');
    for (const k of keys) if (k.key.length !== 32) throw new Error(`encryption key "${k.id}" must be 32 bytes (AES-256)`);
    this.current = keys[0]!;
    this.byId = new Map(keys.map((k) => [k.id, k.key]));
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', this.current.key, iv);
      const plain = temporal.api.common.v1.Payload.encode(payload).finish();
      const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
      return {
        metadata: {
          encoding: text(ENCRYPTED_ENCODING),
          [CIPHER_METADATA]: text(CIPHER),
          [KEY_ID_METADATA]: text(this.current.id),
        },
        data: sealed,
      };
    });
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => {
      if (fromText(payload.metadata?.encoding) !== ENCRYPTED_ENCODING) return payload;
      const keyId = fromText(payload.metadata?.[KEY_ID_METADATA]) ?? '';
      const key = this.byId.get(keyId);
      if (!key) throw new UnknownEncryptionKey(keyId);
      const sealed = Buffer.from(payload.data ?? new Uint8Array());
      if (sealed.length < IV_BYTES + TAG_BYTES) throw new PayloadDecryptionFailed(keyId);
      const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES));
      decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
      let plain: Buffer;
      try {
        plain = Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
      } catch {
        throw new PayloadDecryptionFailed(keyId);
      }
      return temporal.api.common.v1.Payload.decode(plain) as Payload;
    });
  }
}

/** Failures' messages and stacks as payloads, so the codec covers them too (see failure-converter.cjs). */
export const FAILURE_CONVERTER_PATH = fileURLToPath(new URL('./failure-converter.cjs', import.meta.url));

/**
 * The data converter for a region: its encryption codec (none when no keys are configured, dev only), and the
 * failure converter that puts failure messages and stack traces into payloads the codec encrypts.
 */
export function dataConverterFor(keys: readonly EncryptionKey[] | undefined): { payloadCodecs: PayloadCodec[]; failureConverterPath: string } {
  return { payloadCodecs: keys ? [new EncryptionCodec(keys)] : [], failureConverterPath: FAILURE_CONVERTER_PATH };
}
