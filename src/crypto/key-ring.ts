/**
 * A region's ring of AES-256-GCM keys, as its payloads (src/codec/encryption-codec.ts) and its merchants' signing
 * secrets (src/delivery/secret-box.ts) rotate them: the first key seals, every key opens, and the key id travels
 * beside each sealed value. A sealed value is `iv (12 bytes) | ciphertext | GCM tag (16 bytes)`, a fresh IV each time.
 * Its associated data (authenticated, not stored) is the user's context, NUL and the key id: a value opens only in
 * the context it was sealed for, and only under the key id it was sealed with. NUL cannot occur in either.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** One key of a ring, as configuration names it (`id:<base64>`: PAYLOAD_KEYS_<R>, MERCHANT_SECRET_KEYS_<R>). */
export interface EncryptionKey {
  id: string;
  /** 32 bytes. */
  key: Buffer;
}

/** Why a value does not open: too short for an IV and a tag, under a key not in the ring, or altered or not ours. */
type OpenProblem = 'malformed' | 'unknown_key' | 'not_authentic';

const IV_BYTES = 12;
const TAG_BYTES = 16;
const associatedData = (context: string, keyId: string) => Buffer.from(`${context}\0${keyId}`, 'utf8');

export class KeyRing {
  /** The id of the key that seals. */
  readonly currentId: string;
  private readonly byId: Map<string, Buffer>;

  /** `keys[0]` seals, every key opens; `what` names the ring when one is refused. */
  constructor(keys: readonly EncryptionKey[], what: string) {
    if (keys.length === 0) throw new Error(`a ${what} key ring needs at least one key`);
    for (const k of keys) if (k.key.length !== 32) throw new Error(`${what} key "${k.id}" must be 32 bytes (AES-256)`);
    this.currentId = keys[0]!.id;
    this.byId = new Map(keys.map((k) => [k.id, k.key]));
  }

  has(keyId: string): boolean {
    return this.byId.has(keyId);
  }

  /** `plain` sealed under the current key for `context`. */
  seal(plain: Uint8Array, context: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.byId.get(this.currentId)!, iv);
    cipher.setAAD(associatedData(context, this.currentId));
    return Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  }

  /** What `sealed` holds when it was sealed under `keyId` for `context`; otherwise why it does not open. */
  open(keyId: string, sealed: Buffer, context: string): Buffer | OpenProblem {
    if (sealed.length < IV_BYTES + TAG_BYTES) return 'malformed';
    const key = this.byId.get(keyId);
    if (!key) return 'unknown_key';
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES));
    decipher.setAAD(associatedData(context, keyId));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
    } catch {
      return 'not_authentic';
    }
  }
}
