/**
 * The workflow interceptors every hold-sweeper workflow runs with (bundled by `bundleWorkflows`,
 * src/workers/region-worker.ts): a workflow whose input a worker of an encrypted region could not decrypt (the
 * refusal marker of src/contracts/unencrypted.ts) fails at once with `UnencryptedPayloadRefused`, before it runs
 * a single command. A client without the region's key cannot start a sweep or a hold's release there. And a workflow
 * that returns completes only once every signal and Update handler has finished (`allHandlersFinished`), whichever
 * return it took: no handler's work is cut off by the run's end. (Continue-as-new throws rather than returns: each
 * workflow awaits its handlers itself before it.)
 *
 * A workflow interceptor rather than a check in each workflow: every workflow type, present and future, is covered,
 * and the check runs before the workflow's own code. Histories of earlier builds never carry the marker (their
 * payloads were decrypted before it existed), so replaying them meets no new command; waiting for handlers that have
 * finished sends none either.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  type WorkflowInterceptorsFactory,
} from '@temporalio/workflow';
import { isRefusedUnencrypted, UNENCRYPTED_REFUSED, UNENCRYPTED_REFUSED_WHY } from '../contracts/unencrypted.js';

/** The failure type of a workflow started with an input that was not encrypted, in an encrypted region. */
export const UNENCRYPTED_PAYLOAD_REFUSED = 'UnencryptedPayloadRefused';

export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [
    {
      async execute(input, next) {
        const refused = input.args.find(isRefusedUnencrypted);
        if (refused) {
          const { namespace, encoding } = refused[UNENCRYPTED_REFUSED];
          throw ApplicationFailure.create({
            type: UNENCRYPTED_PAYLOAD_REFUSED,
            nonRetryable: true,
            message: `workflow input ${UNENCRYPTED_REFUSED_WHY}; namespace ${namespace}, encoding ${encoding}: nothing was done`,
          });
        }
        const result = await next(input);
        await condition(allHandlersFinished);
        return result;
      },
    },
  ],
});
