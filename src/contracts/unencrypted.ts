/**
 * What a worker of an encrypted region makes of a payload that was not encrypted (src/codec/encryption-codec.ts,
 * `unencrypted: 'refuse'`): this marker, in place of the value the sender meant. Pure and sandbox-safe: workflows
 * recognise it. A workflow started with it fails at once with `UnencryptedPayloadRefused`
 * (src/workflows/interceptors.ts), before any command; a signal or Update carrying it is refused with
 * `UNENCRYPTED_REFUSED_WHY`, like any other malformed decision, and wedges nothing.
 *
 * Whoever holds no payload key cannot say anything to an encrypted region's workflows: the `temporal` CLI talks to
 * them through the codec endpoint (`--codec-endpoint`, `--codec-auth`), which encrypts what it sends.
 */

/** The marker's one key: nothing a sender means to say has it. */
export const UNENCRYPTED_REFUSED = 'hold-sweeper:unencrypted-payload-refused';

interface RefusedUnencrypted {
  [UNENCRYPTED_REFUSED]: {
    /** The namespace whose worker refused it. */
    namespace: string;
    /** The encoding the payload arrived with (`json/plain`, `binary/null`, …); its content is dropped, never kept. */
    encoding: string;
  };
}

export function refusedUnencrypted(
  namespace: string,
  payload: { metadata?: Record<string, Uint8Array> | null },
): RefusedUnencrypted {
  const encoding = payload.metadata?.encoding;
  return { [UNENCRYPTED_REFUSED]: { namespace, encoding: encoding ? new TextDecoder().decode(encoding) : '(none)' } };
}

export function isRefusedUnencrypted(value: unknown): value is RefusedUnencrypted {
  return typeof value === 'object' && value !== null && UNENCRYPTED_REFUSED in value;
}

/** Why a signal or Update carrying the marker did not apply. */
export const UNENCRYPTED_REFUSED_WHY =
  'refused: the payload was not encrypted, and this region accepts only encrypted payloads ' +
  '(send it through the codec endpoint: temporal ... --codec-endpoint <url> --codec-auth "Bearer <token>")';
