/**
 * One encryption key of a region, as configuration names it (`id:<base64>`): of its payloads (PAYLOAD_KEYS_<R>,
 * src/codec/encryption-codec.ts) or its merchants' secrets (MERCHANT_SECRET_KEYS_<R>, src/delivery/secret-box.ts).
 */
export interface EncryptionKey {
  id: string;
  /** 32 bytes. */
  key: Buffer;
}
