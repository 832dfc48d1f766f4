/**
 * Real responses checked against the OpenAPI document the server publishes: the operation found by method and path
 * (its `{param}` templates), the response schema for the status found (or `default`), `$ref`s resolved into the
 * document's components, validated by Ajv (JSON Schema 2020-12, as OpenAPI 3.1 is). A status the document does not
 * list for the operation is an error too.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

export interface OpenApiDocument {
  paths: Record<
    string,
    Record<string, { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> }>
  >;
  components?: Record<string, unknown>;
}

const DOC_ID = 'https://hold-sweeper.invalid/openapi.json';

/** `#/components/...` refs made absolute, so a schema compiled alone finds them in the added document. */
function absoluteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(absoluteRefs);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        k,
        k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `${DOC_ID}${v}` : absoluteRefs(v),
      ]),
    );
  }
  return value;
}

export function openApiValidator(doc: OpenApiDocument) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema({ $id: DOC_ID, components: absoluteRefs(doc.components ?? {}) });
  const compiled = new Map<string, ValidateFunction>();
  const templates = Object.keys(doc.paths).map((template) => ({
    template,
    pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
  }));
  let checked = 0;
  return {
    /** The reasons `body` is not what the document says `method path` answers with `status`; empty when it is. */
    check(method: string, path: string, status: number, body: unknown): string[] {
      const bare = path.split('?')[0]!;
      const found = templates.find((t) => t.pattern.test(bare));
      if (!found) return [`no path of the document matches ${bare}`];
      const operation = doc.paths[found.template]![method.toLowerCase()];
      if (!operation) return [`${method} ${found.template} is not in the document`];
      const response = operation.responses?.[String(status)] ?? operation.responses?.default;
      if (!response) return [`${method} ${found.template} does not document status ${status}`];
      const schema = response.content?.['application/json']?.schema;
      if (!schema) return [`${method} ${found.template} ${status} has no JSON schema`];
      const key = `${method} ${found.template} ${status}`;
      let validate = compiled.get(key);
      if (!validate) {
        validate = ajv.compile(absoluteRefs(schema) as object);
        compiled.set(key, validate);
      }
      checked++;
      return validate(body) ? [] : (validate.errors ?? []).map((e) => `${key}: ${e.instancePath || '/'} ${e.message}`);
    },
    /** How many responses were checked (a test that checked none checked nothing). */
    get checked() {
      return checked;
    },
  };
}
