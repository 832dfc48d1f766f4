/**
 * The codec endpoint as its own process (operator tooling): `npm run codec-server`. Serves every configured
 * region's namespace with that region's keys, on CODEC_SERVER_ADDRESS, for the Web UI's origin
 * (CODEC_CORS_ORIGIN), requiring CODEC_AUTH_TOKEN when set (always, in production). HOLD_SWEEPER_MODE must be set.
 */
import { ENTRY_POINTS, loadConfig, requireExplicitMode } from '../config.js';
import { ConfigError } from '../errors.js';
import { startCodecServer } from '../codec/codec-server.js';
import { EncryptionCodec } from '../codec/encryption-codec.js';

// Never dev by accident: in dev the token is optional, and an open /decode hands out plaintext.
requireExplicitMode();
// It decodes payloads for browsers: it never holds the key ring of the merchants' secrets, nor a database or Temporal
// credential (it calls neither).
const config = loadConfig(process.env, ENTRY_POINTS.codec);
const address = config.codecServer.address;
if (!address) throw new ConfigError('CODEC_SERVER_ADDRESS', undefined, 'host:port to serve the codec endpoint on');
const codecs = new Map(
  config.regions.map((region) => {
    if (!region.payloadKeys) throw new ConfigError(`PAYLOAD_KEYS_${region.region.toUpperCase()}`, undefined, "the region's keys");
    return [region.namespace, new EncryptionCodec(region.payloadKeys, { namespace: region.namespace, unencrypted: 'pass' })] as const;
  }),
);
const separator = address.lastIndexOf(':');
const server = await startCodecServer({
  codecs,
  corsOrigins: config.codecServer.corsOrigins,
  authToken: config.codecServer.authToken,
  host: address.slice(0, separator).replace(/^\[|\]$/g, ''),
  port: Number(address.slice(separator + 1)),
});
console.log(JSON.stringify({ level: 'info', msg: 'codec endpoint serving', url: server.url, namespaces: [...codecs.keys()] }));
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void server.stop().then(() => process.exit(0)));
