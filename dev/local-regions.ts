/**
 * Both regions wired for a run on one local stack (the benchmark, the chaos run): each region's config, a ledger
 * pool and a Temporal client on the shared connection. Names that differ per run (database, task queue,
 * schedule) are prefixed; namespaces are the product's own.
 */
import { Client, type Connection } from '@temporalio/client';
import type pg from 'pg';
import type { RegionConfig } from '../src/config.js';
import { createPool } from '../src/db/pool.js';
import { REGIONS } from '../src/contracts/regions.js';
import { DEV_SECRET_KEYS } from '../src/delivery/secret-box.js';

export type LocalRegion = RegionConfig & { pool: pg.Pool; client: Client };

export interface LocalRegionNames {
  /** The region's ledger database URL. */
  databaseUrl: (region: RegionConfig['region']) => string;
  taskQueuePrefix: string;
  schedulePrefix: string;
  poolMax: number;
}

export function localRegions(connection: Connection, temporalAddress: string, names: LocalRegionNames): LocalRegion[] {
  return REGIONS.map((region) => {
    const databaseUrl = names.databaseUrl(region);
    return {
      region,
      databaseUrl,
      temporalAddress,
      namespace: `hold-sweeper-${region}`,
      taskQueue: `${names.taskQueuePrefix}-${region}`,
      scheduleId: `${names.schedulePrefix}-${region}`,
      payloadKeys: undefined,
      // The dev ring: its worker processes get it as MERCHANT_SECRET_KEYS_<R> (workerEnvironment), its seeders seal
      // with it.
      secretKeys: DEV_SECRET_KEYS,
      pool: createPool(databaseUrl, { max: names.poolMax }),
      client: new Client({ connection, namespace: `hold-sweeper-${region}` }),
    };
  });
}
