/** The chaos report's account of releases around a history host's kill (bench/chaos-run.ts, `releasePause`). */
import { describe, expect, it } from 'vitest';
import { releasePause } from '../../bench/chaos-run.js';

describe('releasePause', () => {
  it('counts releases per second around the moment and finds the longest pause and gap after it', () => {
    const start = 1_000_000;
    const at = start + 20_000;
    // Ten a second until the moment, none for 3.5 s after it, then ten a second again for 5 s.
    const before = Array.from({ length: 100 }, (_, i) => at - 10_000 + i * 100);
    const after = Array.from({ length: 50 }, (_, i) => at + 3_500 + i * 100);
    const pause = releasePause([...after, ...before], at, start);
    expect(pause.atSeconds).toBe(20);
    expect(pause.releasesPerSecond.slice(0, 10)).toEqual(Array(10).fill(10));
    expect(pause.releasesPerSecond.slice(10, 14)).toEqual([0, 0, 0, 5]);
    expect(pause.longestPauseSeconds).toBe(3);
    expect(pause.longestGapMs).toBe(3_500);
    expect(pause.medianGapBeforeMs).toBe(100);
    // After the last release nothing is a pause: the night was over.
    expect(pause.releasesPerSecond.slice(19)).toEqual(Array(51).fill(0));
  });
});
