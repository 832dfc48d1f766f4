/**
 * Payload encryption for Temporal: workflow and activity inputs and results (hold ids, amounts, merchant ids,
 * payload excerpts) are encrypted by the worker and the clients before they leave the process, so a shared or
 * hosted Temporal server stores only ciphertext. EU keys stay with EU workers: each region has its own keys.
 *
 * Sealed by the region's key ring (src/crypto/key-ring.ts); the key id travels in the payload's metadata so keys rotate:
 * new payloads use the current (first) key, old histories decode while their key is still configured. Each
 * ciphertext is bound to its namespace: the associated data (authenticated, not stored) is the namespace and the
 * key id, so a payload copied into another namespace that shares the key fails authentication there; one that does
 * not say it is bound (`encryption-aad`) is refused like a tampered one.
 *
 * In an encrypted region, a worker accepts only encrypted payloads (`unencrypted: 'refuse'`): a workflow started,
 * signalled or updated with plain JSON (a client without the region's key) gets the refusal marker of
 * src/contracts/unencrypted.ts instead of the value it sent. Decoding never throws for it: a signal that could not
 * be decoded would fail its workflow task on every retry and wedge the workflow.
 */
import { fileURLToPath } from 'node:url';
import { defaultPayloadConverter, type Payload, type PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { refusedUnencrypted } from '../contracts/unencrypted.js';
import { KeyRing, type EncryptionKey } from '../crypto/key-ring.js';

// A CommonJS package: Node's ESM loader cannot see its named exports.
const { temporal } = proto;

export const ENCRYPTED_ENCODING = 'binary/encrypted';
const KEY_ID_METADATA = 'encryption-key-id';
const CIPHER_METADATA = 'encryption-cipher';
/** What the associated data binds, named on every payload. */
const AAD_METADATA = 'encryption-aad';
const AAD_NAMESPACE_AND_KEY = 'namespace,key-id';
const CIPHER = 'AES-256-GCM';

/** A payload names a key this process does not have (rotated out too early, or another region's). */
export class UnknownEncryptionKey extends Error {
  override readonly name = 'UnknownEncryptionKey';
  constructor(readonly keyId: string) {
    super(
      `payload was encrypted with key "${keyId}", which is not configured here; keep old keys configured until their histories are gone`,
    );
  }
}

/**
 * Ciphertext that does not authenticate: tampered with, truncated, encrypted under another key or for another
 * namespace.
 */
export class PayloadDecryptionFailed extends Error {
  override readonly name = 'PayloadDecryptionFailed';
  constructor(
    readonly keyId: string,
    readonly namespace: string,
  ) {
    super(
      `payload under key "${keyId}" failed authentication (AES-256-GCM) in namespace "${namespace}": it was altered, or is not ours, or belongs to another namespace`,
    );
  }
}

const text = (value: string) => new TextEncoder().encode(value);
const fromText = (value: Uint8Array | null | undefined) => (value ? new TextDecoder().decode(value) : undefined);

interface EncryptionCodecOptions {
  /** The Temporal namespace (the region's) every payload of this codec is bound to. */
  namespace: string;
  /**
   * What decoding does with a payload that is not encrypted: `pass` it through as it came (the codec endpoint shows
   * it to a reader; a client reading results), or `refuse` it (workers: it decodes to the refusal marker).
   */
  unencrypted: 'pass' | 'refuse';
}

export class EncryptionCodec implements PayloadCodec {
  private readonly ring: KeyRing;
  private readonly namespace: string;
  /** What each payload is bound to, beside its key id. */
  private readonly context: string;
  private readonly unencrypted: EncryptionCodecOptions['unencrypted'];

  /** `keys[0]` encrypts; every key decrypts. */
  constructor(keys: readonly EncryptionKey[], { namespace, unencrypted }: EncryptionCodecOptions) {
    this.ring = new KeyRing(keys, 'payload');
    if (!namespace) throw new Error('EncryptionCodec needs the namespace its payloads are bound to');
    this.namespace = namespace;
    this.context = `hold-sweeper\0${namespace}`;
    this.unencrypted = unencrypted;
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => ({
      metadata: {
        encoding: text(ENCRYPTED_ENCODING),
        [CIPHER_METADATA]: text(CIPHER),
        [KEY_ID_METADATA]: text(this.ring.currentId),
        [AAD_METADATA]: text(AAD_NAMESPACE_AND_KEY),
      },
      data: this.ring.seal(temporal.api.common.v1.Payload.encode(payload).finish(), this.context),
    }));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => {
      if (fromText(payload.metadata?.encoding) !== ENCRYPTED_ENCODING) {
        return this.unencrypted === 'pass'
          ? payload
          : defaultPayloadConverter.toPayload(refusedUnencrypted(this.namespace, payload));
      }
      const keyId = fromText(payload.metadata?.[KEY_ID_METADATA]) ?? '';
      if (!this.ring.has(keyId)) throw new UnknownEncryptionKey(keyId);
      // An unknown binding, or none, is not ours to guess at.
      const plain =
        fromText(payload.metadata?.[AAD_METADATA]) === AAD_NAMESPACE_AND_KEY &&
        this.ring.open(keyId, Buffer.from(payload.data ?? new Uint8Array()), this.context);
      if (!Buffer.isBuffer(plain)) throw new PayloadDecryptionFailed(keyId, this.namespace);
      return temporal.api.common.v1.Payload.decode(plain) as Payload;
    });
  }
}

/** Failures' messages and stacks as payloads, so the codec covers them too (see failure-converter.cjs). */
export const FAILURE_CONVERTER_PATH = fileURLToPath(new URL('./failure-converter.cjs', import.meta.url));

/**
 * The data converter for a region: its encryption codec (none when no keys are configured, dev only), bound to the
 * region's namespace, and the failure converter that puts failure messages and stack traces into payloads the codec
 * encrypts. Workers `refuse` unencrypted payloads; clients `pass` them (they only read what our workers wrote).
 */
export function dataConverterFor(
  region: { payloadKeys: readonly EncryptionKey[] | undefined; namespace: string },
  unencrypted: EncryptionCodecOptions['unencrypted'] = 'pass',
): { payloadCodecs: PayloadCodec[]; failureConverterPath: string } {
  return {
    payloadCodecs: region.payloadKeys
      ? [new EncryptionCodec(region.payloadKeys, { namespace: region.namespace, unencrypted })]
      : [],
    failureConverterPath: FAILURE_CONVERTER_PATH,
  };
}
