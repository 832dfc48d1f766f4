/**
 * The merchant budget's cost per acquire: one `admit_attempt` call (one round trip, one row lock) against
 * a real embedded PostgreSQL, from concurrent clients, over many merchants and over one hot merchant.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrate } from '../src/db/migrate.js';
import { startEmbeddedPostgres } from '../dev/embedded-postgres.js';
import { createMerchantBudget } from '../src/sql/merchant-budget.js';
import { insertMerchants } from '../dev/seed.js';
import { DEV_SECRET_KEYS, localKeyRing } from '../src/delivery/secret-box.js';

export async function runLimiterBench(options: { seconds: number; clients: number; merchantCount: number }) {
  const { seconds, clients, merchantCount } = options;
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'hold-sweeper-limiter-'));
  await fs.chmod(dataDir, 0o777);
  const postgres = await startEmbeddedPostgres({
    dataDir: path.join(dataDir, 'pg'),
    databases: ['limiter'],
    durable: true,
  });
  const pool = new pg.Pool({ connectionString: postgres.urlFor('limiter'), max: clients });
  // Its merchants have no secrets (the limiter never signs): the dev ring, for the migration's sealing step.
  const secrets = { region: 'us' as const, sealer: localKeyRing(DEV_SECRET_KEYS) };
  try {
    await migrate(pool, secrets);
    const ids = Array.from({ length: merchantCount }, (_, i) => `m_${i}`);
    await insertMerchants(
      pool,
      secrets,
      ids.map((id) => ({ id, endpointUrl: `https://${id}.example/h`, ratePerSecond: 5, burst: 1 })),
    );
    const budget = createMerchantBudget(pool);

    async function run(label: string, pick: () => string) {
      const latencies: number[] = [];
      const deadline = performance.now() + seconds * 1000;
      const outcomes = { send: 0, wait: 0, denied: 0, busy: 0, paused: 0 };
      await Promise.all(
        Array.from({ length: clients }, async () => {
          while (performance.now() < deadline) {
            const started = performance.now();
            const decision = await budget.acquire(pick(), 'retry');
            latencies.push(performance.now() - started);
            outcomes[decision.outcome]++;
          }
        }),
      );
      latencies.sort((a, b) => a - b);
      const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!.toFixed(2);
      console.log(
        `${label}: ${(latencies.length / seconds).toFixed(0)} acquires/s with ${clients} clients; ` +
          `latency p50 ${q(0.5)} ms, p99 ${q(0.99)} ms; outcomes send ${outcomes.send}, wait ${outcomes.wait}, denied ${outcomes.denied}`,
      );
    }

    await run(`${merchantCount} merchants, random`, () => ids[Math.floor(Math.random() * ids.length)]!);
    await run('1 hot merchant', () => ids[0]!);
    console.log(
      `reproduce: npm run bench:limiter -- --seconds ${seconds} --clients ${clients} --merchants ${merchantCount}`,
    );
  } finally {
    await pool.end();
    await postgres.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}
