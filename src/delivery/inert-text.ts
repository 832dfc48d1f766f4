/**
 * Text from outside (a merchant's response body) as we store and print it: one line, with every character that could
 * command a terminal or reorder what it shows escaped visibly. C0 and C1 controls and DEL (ESC starts a terminal's
 * escape sequences, an unterminated OSC swallows the screen; U+009B is a CSI on its own), the line and paragraph
 * separators and the bidirectional overrides (which make a line read other than it is).
 *
 * `\n`, `\r` and `\t` read as themselves, any other as `\u` and four hex digits, as in a JSON string: an escaped text
 * is still valid inside one, and reads the same. A backslash is kept as it is, so escaping twice changes nothing; a
 * `\u001b` in the output may be the merchant's own six characters, never an ESC.
 */
const UNSAFE = /[\p{Cc}\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;
const SHORT: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

export function inert(text: string): string {
  return text.replace(UNSAFE, (c) => SHORT[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Text of many lines we wrote ourselves (a table, a report), every line made inert: only our line breaks remain. */
export function inertLines(text: string): string {
  return text.split('\n').map(inert).join('\n');
}
