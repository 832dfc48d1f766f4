/**
 * The failure converter of every worker, client and workflow bundle: a failure's message and stack trace travel
 * as an encoded payload (`encodeCommonAttributes`), so the region's payload codec encrypts them like any input or
 * result. Merchant response excerpts and stack traces end up in failure messages; in clear, they would sit in
 * the Temporal server's store, outside the region's keys. The history shows "Encoded failure"; the Web UI and
 * the CLI decode the real text through the codec endpoint.
 *
 * CommonJS on purpose: the SDK loads it by path with require() (failureConverterPath), in the worker, the
 * client and the workflow bundle alike, whatever runs the TypeScript around it.
 */
const { DefaultFailureConverter } = require('@temporalio/common');

exports.failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
