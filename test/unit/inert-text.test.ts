/** Text from outside, made inert (src/delivery/inert-text.ts): one line, nothing a terminal or a reader obeys. */
import { describe, expect, it } from 'vitest';
import { inert, inertLines } from '../../src/delivery/inert-text.js';

describe('inert', () => {
  it('escapes C0, DEL and C1 controls visibly, line breaks and tabs as \\n \\r \\t', () => {
    expect(inert('\x1b]0;pwned\x07\x1b[31mRED\x00\x7f\u009b2J\u0085')).toBe(
      '\\u001b]0;pwned\\u0007\\u001b[31mRED\\u0000\\u007f\\u009b2J\\u0085',
    );
    expect(inert('a\nb\r\nc\td')).toBe('a\\nb\\r\\nc\\td');
  });

  it('escapes what reorders or breaks a line: bidirectional overrides and isolates, line and paragraph separators', () => {
    expect(inert('pay \u202eevil\u202c \u2066x\u2069 \u200e\u200f\u061c \u2028\u2029')).toBe(
      'pay \\u202eevil\\u202c \\u2066x\\u2069 \\u200e\\u200f\\u061c \\u2028\\u2029',
    );
  });

  it('leaves printable text, any script and emoji, and its backslashes as they are; twice is once', () => {
    const printable = '{"error":"schéma refusé — 拒否 🚫","path":"C:\\\\tmp"}';
    expect(inert(printable)).toBe(printable);
    const hostile = '\x1b]52;c;ZXZpbA==\x07\n\u202e';
    expect(inert(inert(hostile))).toBe(inert(hostile));
  });

  it('is still valid inside a JSON string, and reads there as the original', () => {
    const original = 'a\x1b[31m\u009b\u2028\n\tz';
    expect(JSON.parse(`"${inert(original)}"`)).toBe(original);
  });

  it('inertLines keeps our own line breaks, and only those', () => {
    expect(inertLines('id  error\n1   \x1b[2Jgone\r')).toBe('id  error\n1   \\u001b[2Jgone\\r');
  });
});
