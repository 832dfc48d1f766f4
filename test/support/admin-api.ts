/** Calls of the admin API's verbs as the tests make them (in-process, and against the locked cluster). */
import type { AdminVerb } from '../../src/api/admin-verbs.js';

/** A request a verb accepts: placeholders for its path, its required fields filled by type. */
export function requestFor(verb: AdminVerb): { url: string; init: RequestInit } {
  const url = verb.path.replace(/:([A-Za-z]+)/g, (_, name: string) => `missing_${name}`);
  const body = Object.fromEntries(
    (verb.required ?? []).map((field) => {
      const type = verb.fields[field]!.type;
      const enums = verb.fields[field]!.enum as string[] | undefined;
      return [
        field,
        enums
          ? enums[0]
          : type === 'integer' || type === 'number'
            ? 1
            : type === 'boolean'
              ? true
              : `placeholder ${field}`,
      ];
    }),
  );
  if (verb.method === 'GET')
    return { url: `${url}?${new URLSearchParams(body as Record<string, string>)}`, init: { method: 'GET' } };
  return { url, init: { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } };
}
