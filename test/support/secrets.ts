/**
 * The merchant-secret key ring of every test region unless a test gives its own: random per test file (its module
 * instance), and not the dev ring, so a region's CLI and worker processes run in production mode with it too. The
 * harness's workers, `seedNight`, `withOps` and the worker and receiver processes (MERCHANT_SECRET_KEYS_<R>) all use
 * the region's `config.secretKeys`, this ring by default: what one seals, the others open.
 */
import { randomBytes } from 'node:crypto';
import type { EncryptionKey } from '../../src/crypto/key-ring.js';

export const TEST_SECRET_KEYS: readonly EncryptionKey[] = Object.freeze([{ id: 'test', key: randomBytes(32) }]);
