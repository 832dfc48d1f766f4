/**
 * The codec endpoint as its own process (operator tooling): `npm run codec-server`. Serves every configured
 * region's namespace with that region's keys, on CODEC_SERVER_ADDRESS, for the Web UI's origin
 * (CODEC_CORS_ORIGIN). Production: each request carries the signed-in user's OIDC token (CODEC_OIDC_ISSUER),
 * verified like the admin API's, over TLS (CODEC_TLS_* or CODEC_BEHIND_TLS_PROXY); in dev CODEC_AUTH_TOKEN may stand
 * in. Its counters are served on CODEC_METRICS_ADDRESS, never on the browsers' port. HOLD_SWEEPER_MODE must be set.
 */
import '../node-version.js';
import { ENTRY_POINTS, loadConfig, requireExplicitMode } from '../config.js';
import { byNamespace, createTokenVerifier } from '../api/identity.js';
import { tlsOf } from '../api/serve.js';
import { ConfigError } from '../errors.js';
import { startCodecServer } from '../codec/codec-server.js';
import { EncryptionCodec } from '../codec/encryption-codec.js';
import { exitOnFatal, nameProcess, stopOnSignal } from '../observability/logger.js';

const log = nameProcess('codec-server');

async function main() {
  // Never dev by accident: in dev the token is optional, and an open /decode hands out plaintext.
  requireExplicitMode();
  // It decodes payloads for browsers: it never holds the key ring of the merchants' secrets, nor a database or Temporal
  // credential (it calls neither).
  const config = loadConfig(process.env, ENTRY_POINTS.codec);
  log.level = config.observability.logLevel.toLowerCase();
  const address = config.codecServer.address;
  if (!address) throw new ConfigError('CODEC_SERVER_ADDRESS', undefined, 'host:port to serve the codec endpoint on');
  const codecs = new Map(
    config.regions.map((region) => {
      if (!region.payloadKeys)
        throw new ConfigError(`PAYLOAD_KEYS_${region.region.toUpperCase()}`, undefined, "the region's keys");
      return [
        region.namespace,
        new EncryptionCodec(region.payloadKeys, { namespace: region.namespace, unencrypted: 'pass' }),
      ] as const;
    }),
  );
  const separator = address.lastIndexOf(':');
  const server = await startCodecServer({
    codecs,
    corsOrigins: config.codecServer.corsOrigins,
    authToken: config.codecServer.authToken,
    // Roles are judged in the region of the namespace asked for: anyone with a role there may read what they can see in
    // the Web UI (Temporal decides what that is), an operator or an approver may encode.
    ...(config.codecServer.oidc
      ? { identity: byNamespace(await createTokenVerifier(config.codecServer.oidc), config.regions) }
      : {}),
    https: await tlsOf(config.codecServer),
    logger: log,
    host: address.slice(0, separator).replace(/^\[|\]$/g, ''),
    port: Number(address.slice(separator + 1)),
    metrics: config.codecServer.metrics,
  });
  log.info(
    { url: server.url, metrics: server.metricsUrl ?? null, namespaces: [...codecs.keys()] },
    'codec endpoint serving',
  );
  stopOnSignal(() => server.stop());
}

main().catch((err) => exitOnFatal(err));
