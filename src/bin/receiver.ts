/**
 * The processor-event receiver of one region: `POST /processor/events` (src/processor/receiver.ts).
 *
 *   HOLD_SWEEPER_MODE=production HOLD_SWEEPER_REGIONS=us TEMPORAL_ADDRESS=temporal:7233 \
 *   DATABASE_URL_US=postgres://... PAYLOAD_KEYS_US=k1:<base64> MERCHANT_SECRET_KEYS_US=k1:<base64> \
 *   PROCESSOR_SIGNING_SECRET_US=whsec_... npm run receiver
 *
 * It records events in the region's ledger database and hands them to the region's workers through Temporal; it
 * needs no worker in the same process, and it keeps recording (and answering) while Temporal is unreachable.
 * In dev mode, unset addresses are a running `npm start`'s.
 */
import '../node-version.js';
import { Client } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import { tlsOf } from '../api/serve.js';
import { ENTRY_POINTS, loadConfig, loadProcessorConfig, requireExplicitMode } from '../config.js';
import { exitOnFatal, nameProcess, stopOnSignal } from '../observability/logger.js';
import { serveMetrics } from '../observability/metrics-listener.js';
import { startTracing } from '../observability/tracing.js';
import { dataConverterFor } from '../codec/encryption-codec.js';
import { createPool } from '../db/pool.js';
import { ConfigError } from '../errors.js';
import { addressesIn } from '../dev-stack.js';
import { createProcessorReceiver, RECORDING_POOL_OPTIONS, REFUSAL_POOL_OPTIONS } from '../processor/receiver.js';
import { keepApiKeyFresh, lazyClientConnection, PLAINTEXT } from '../temporal-connection.js';
import { ledgerReady } from '../workers/startup.js';

const log = nameProcess('receiver');

async function main() {
  requireExplicitMode();
  // Its role may not read a merchant secret, so in production it does not hold their key ring either.
  const config = loadConfig(process.env, ENTRY_POINTS.receiver);
  if (config.regions.length !== 1) {
    throw new ConfigError(
      'HOLD_SWEEPER_REGIONS',
      config.regions.map((r) => r.region).join(','),
      'exactly one region: one receiver per region',
    );
  }
  const configured = config.regions[0]!;
  const processor = loadProcessorConfig(process.env, configured.region, config.mode);
  log.level = config.observability.logLevel.toLowerCase();
  const up = configured.region.toUpperCase();
  const { databaseUrl, temporalAddress } = (await addressesIn(config.mode))(configured);
  if (!databaseUrl) throw new ConfigError(`DATABASE_URL_${up}`, undefined, 'a postgres:// URL');
  if (!temporalAddress) throw new ConfigError(`TEMPORAL_ADDRESS_${up}`, undefined, 'host:port (or TEMPORAL_ADDRESS)');

  const pool = createPool(databaseUrl, RECORDING_POOL_OPTIONS);
  const refusalPool = createPool(databaseUrl, REFUSAL_POOL_OPTIONS);
  // Production: its own role, the schema current (npm run migrate ran). Dev: it migrates the development database,
  // and the migrations end with sealing merchant secrets (the dev ring).
  await ledgerReady(log, pool, config.mode, 'receiver', configured);
  // Lazy: the receiver records and answers while Temporal is down; the relay hands over once it is back.
  const connection = lazyClientConnection(configured.temporal ?? PLAINTEXT, temporalAddress);
  const stopRefreshing = keepApiKeyFresh(configured.temporal ?? PLAINTEXT, [connection], (err) =>
    log.warn({ error: err }, 'Temporal API key not refreshed'),
  );
  // A verified callback starts its hold's trace; the interceptor carries it into the workflow it signals.
  const tracing = startTracing('hold-sweeper-receiver', { sampleRatio: config.observability.traceSampleRatio });
  const client = new Client({
    connection,
    namespace: configured.namespace,
    dataConverter: dataConverterFor(configured),
    interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] },
  });
  const receiver = createProcessorReceiver({
    region: configured.region,
    https: await tlsOf(processor),
    pool,
    refusalPool,
    refusedRetentionMs: processor.refusedRetentionMs,
    client,
    taskQueue: configured.taskQueue,
    processorKey: processor.signingKey,
    gapWaitMs: processor.gapWaitMs,
  });
  const address = await receiver.listen(processor.port, processor.host);
  const metrics = processor.metrics ? await serveMetrics(receiver.metrics, processor.metrics, 'receiver') : undefined;
  log.info(
    {
      region: configured.region,
      url: `${processor.tls ? 'https' : 'http'}://${address.address}:${address.port}/processor/events`,
      tls: processor.tls ? 'own' : processor.behindTlsProxy ? 'behind a TLS proxy' : 'none (dev)',
      metrics: metrics?.url ?? null,
      namespace: configured.namespace,
      taskQueue: configured.taskQueue,
    },
    'processor receiver listening',
  );
  stopOnSignal(async () => {
    stopRefreshing();
    await metrics?.close();
    await receiver.close();
    await connection.close();
    await tracing.shutdown();
    await pool.end();
    await refusalPool.end();
  });
}

main().catch((err) => exitOnFatal(err));
