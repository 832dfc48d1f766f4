/** `npm run ops -- ...` in process, against a test region, as an operator's shell would configure it. */
import { inject, type ProvidedContext } from 'vitest';
import type { EncryptionKey } from '../../src/crypto/key-ring.js';
import { runOps } from '../../src/operations/cli.js';
import { keyRingVariable } from '../../dev/worker-processes.js';
import type { TestRegion } from './harness.js';

export type Ops = (...args: string[]) => Promise<number>;

/** The region's ledger as `service`'s database role (test/integration/global-setup.ts made the roles). */
export function ledgerRoleUrl(region: TestRegion, service: keyof ProvidedContext['ledgerRoleUrls']): string {
  return `${inject('ledgerRoleUrls')[service]}${new URL(region.databaseUrl).pathname.slice(1)}`;
}

/**
 * Runs `work` with the CLI configured for `region` (its database, Temporal, namespace and task queue, its
 * merchant-secret key ring) in `mode`, and the payload key when the region has one; collects its output lines. The
 * environment is restored after.
 */
export async function withOps(
  region: TestRegion,
  mode: 'dev' | 'production',
  work: (ops: Ops, lines: string[]) => Promise<void>,
  payloadKey?: EncryptionKey,
  /**
   * The ledger as the CLI connects to it: in production its own role (production refuses the superuser the tests
   * use) over TLS, in dev the region's own URL unless another is given.
   */
  databaseUrl = mode === 'production'
    ? `${ledgerRoleUrl(region, 'ops')}${inject('postgresTlsQuery')}`
    : region.databaseUrl,
): Promise<void> {
  const env = { ...process.env };
  const up = region.config.region.toUpperCase();
  Object.assign(process.env, {
    HOLD_SWEEPER_MODE: mode,
    HOLD_SWEEPER_REGIONS: region.config.region,
    [`DATABASE_URL_${up}`]: databaseUrl,
    TEMPORAL_ADDRESS: region.config.temporalAddress,
    // The shared dev server speaks plaintext; production refuses that unless it is said (src/temporal-connection.ts).
    ...(mode === 'production' ? { TEMPORAL_TLS: 'false' } : {}),
    [`TASK_QUEUE_${up}`]: region.config.taskQueue,
    [`TEMPORAL_NAMESPACE_${up}`]: region.config.namespace,
    [`MERCHANT_SECRET_KEYS_${up}`]: keyRingVariable(region.config.secretKeys),
    ...(payloadKey ? { [`PAYLOAD_KEYS_${up}`]: `${payloadKey.id}:${payloadKey.key.toString('base64')}` } : {}),
  });
  try {
    const lines: string[] = [];
    await work((...args) => runOps(args, (l) => lines.push(l)), lines);
  } finally {
    process.env = env;
  }
}
