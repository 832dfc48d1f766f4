/** The Web UI's text for a hold and a sweep (src/contracts/story.ts): the status query's facts, as Markdown. */
import { describe, expect, it } from 'vitest';
import type { HoldStage, HoldStatus } from '../../src/contracts/messages.js';
import { labelPattern } from '../support/coverage.js';
import {
  holdCurrentDetails,
  holdEventsCurrentDetails,
  holdEventsDetails,
  holdLabels,
  sweepCurrentDetails,
} from '../../src/contracts/story.js';

const status = (stage: HoldStage, extra: Partial<HoldStatus> = {}): HoldStatus =>
  ({ ignoredSignals: [], ...stage, ...extra }) as HoldStatus;

describe('holdCurrentDetails', () => {
  it('says what the hold waits for, until when, and where the runbook is, for every waiting stage', () => {
    expect(
      holdCurrentDetails(
        status({
          stage: 'waiting_for_budget',
          policyRun: 1,
          lane: 'retry',
          until: '2026-12-01T06:00:00.000Z',
          reserved: true,
        }),
      ),
    ).toBe(
      [
        "### Waiting for the merchant's rate budget",
        '',
        '- Stage: `waiting_for_budget`',
        '- Policy run: 1',
        '- Lane: retry (a slot is reserved)',
        '- Until: 2026-12-01T06:00:00.000Z',
        '',
        'Runbook: docs/runbook.md#merchantratelimited',
      ].join('\n'),
    );
    expect(
      holdCurrentDetails(
        status({
          stage: 'backing_off',
          policyRun: 2,
          attempt: 3,
          until: '2026-12-01T06:01:00.000Z',
          reason: 'backoff 40 s',
        }),
      ),
    ).toContain('- Attempt 3 failed; next attempt at 2026-12-01T06:01:00.000Z\n- Why then: backoff 40 s');
    expect(
      holdCurrentDetails(
        status({ stage: 'held', policyRun: 1, merchantStatus: 'paused', until: '2026-12-01T06:05:00.000Z' }),
      ),
    ).toContain('- Merchant: paused');
  });

  it('shows a quarantine with its reason, since, detail on one line, the last attempt and the ignored signals', () => {
    const text = holdCurrentDetails(
      status(
        {
          stage: 'quarantined',
          policyRun: 1,
          reason: 'rejected',
          since: '2026-12-01T05:00:00.000Z',
          detail: 'HTTP 400 from m_1:\n bad  ref',
        },
        {
          lastAttempt: { attemptNumber: 1, outcome: 'HTTP 400', at: '2026-12-01T05:00:00.000Z' },
          ignoredSignals: [
            {
              signal: 'discard',
              payload: { type: 'object', bytes: 14 },
              at: '2026-12-01T05:01:00.000Z',
              stage: 'quarantined',
              why: 'malformed discard: "reason" must be ...',
            },
          ],
        },
      ),
    );
    expect(text).toContain(
      '- Reason: **rejected**\n- Since: 2026-12-01T05:00:00.000Z\n- Detail: HTTP 400 from m_1: bad ref',
    );
    expect(text).toContain('- Last attempt: #1, HTTP 400 at 2026-12-01T05:00:00.000Z');
    expect(text).toContain(
      '- Ignored signals: 1\n  - discard (object, 14 bytes) at 2026-12-01T05:01:00.000Z: malformed discard',
    );
    expect(text).toContain('Runbook: docs/runbook.md#webhooksquarantined');
  });

  it('ends without a runbook link once nothing waits', () => {
    expect(holdCurrentDetails(status({ stage: 'delivered', attempts: 2 }))).toBe(
      '### Delivered\n\n- Stage: `delivered`\n- Attempts: 2',
    );
  });
});

describe('labels and sweep progress', () => {
  it('names Retry-After apart from a backoff, in one form the timeline and the coverage gate both read', () => {
    expect(holdLabels.retryWait('Retry-After 120 s', 'HTTP 429', 2)).toBe(
      'retry after HTTP 429 (attempt 2): Retry-After 120 s',
    );
    expect(holdLabels.retryWait('backoff 12.3 s', 'HTTP 503', 3)).toBe(
      'retry after HTTP 503 (attempt 3): backoff 12.3 s',
    );
    expect(labelPattern('holdLabels.retryWait').test(holdLabels.retryWait('Retry-After 1 s', 'HTTP 429', 1))).toBe(
      true,
    );
  });

  it('gives the page, the totals and the queries that find what the sweep started', () => {
    const text = sweepCurrentDetails(
      'sweep-us-1',
      '2026-12-01T05:00:00.000Z',
      { found: 10, started: 8, alreadyStarted: 1, rejected: 1, pages: 2 },
      { page: 3, listed: 500 },
    );
    expect(text).toContain('### Page 3: 500 holds');
    expect(text).toContain('- Found: 10 · started: 8 · already handled: 1 · rejected: 1');
    expect(text).toContain('`ParentWorkflowId STARTS_WITH "sweep-us-1/"`');
  });
});

describe('the processor-event workflow’s text', () => {
  it('says which sequence is missing, what waits behind it and what to run, once stopped', () => {
    const text = holdEventsCurrentDetails({
      holdId: 'h_1',
      stage: { stage: 'stopped_for_human', expected: 3, since: '2026-12-01T06:00:00.000Z', pending: [4, 5] },
      applied: [{ sequence: 2, eventId: 'evt_2', outcome: 'incremented' }],
      skipped: [],
    });
    expect(text).toBe(
      [
        '### Stopped: a processor event is missing',
        '',
        '- Missing: sequence 3, since 2026-12-01T06:00:00.000Z',
        '- Waiting behind it: 4, 5',
        '- It applies by itself when the processor sends it; or skip it: `npm run ops -- events skip h_1 --sequence 3 --by <you> --reason <why>`',
        '- Applied 2 (evt_2): incremented',
        '',
        'Runbook: docs/runbook.md#processoreventgap',
      ].join('\n'),
    );
    expect(holdEventsDetails('us', 'h_1')).toContain('npm run ops -- events show h_1 --region us');
  });
});
