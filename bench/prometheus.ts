/**
 * Reading a Prometheus text endpoint (the Temporal server's and each worker's): a scrape is a map from series
 * (name and the labels asked for) to value, summed over every other label.
 */

export type Scrape = Map<string, number>;

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/**
 * The series of `text` whose name is in `keep` (name → the labels that tell its series apart; the rest are summed).
 * A series key is `name` or `name{label=value,...}` in the order the labels were asked for.
 */
export function parsePrometheus(
  text: string,
  keep: ReadonlyMap<string, readonly string[]>,
  aliases: ReadonlyMap<string, Alias> = new Map(),
): Scrape {
  const out: Scrape = new Map();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line === '') continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const [, exported, labelText, valueText] = m;
    const alias = aliases.get(exported!);
    const name = alias?.name ?? exported;
    const labels = keep.get(name!);
    if (labels === undefined) continue;
    const value = Number(valueText) * (alias?.scale ?? 1);
    if (!Number.isFinite(value)) continue;
    const found = new Map<string, string>();
    for (const l of (labelText ?? '').matchAll(LABEL)) found.set(l[1]!, l[2]!);
    const key = labels.length === 0 ? name! : `${name}{${labels.map((l) => `${l}=${found.get(l) ?? ''}`).join(',')}}`;
    out.set(key, (out.get(key) ?? 0) + value);
  }
  return out;
}

/** A series exported under another name than the report's key (e.g. in seconds where the report keeps milliseconds). */
export interface Alias {
  name: string;
  scale: number;
}

export async function scrape(
  url: string,
  keep: ReadonlyMap<string, readonly string[]>,
  aliases?: ReadonlyMap<string, Alias>,
): Promise<Scrape | undefined> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    if (!response.ok) return undefined;
    return parsePrometheus(await response.text(), keep, aliases);
  } catch {
    // A scrape that fails (the server busy, a worker restarting) is a gap in the series, not a failed benchmark.
    return undefined;
  }
}

/** Adds scrapes (several workers' endpoints into one). */
export function sumScrapes(scrapes: readonly (Scrape | undefined)[]): Scrape {
  const out: Scrape = new Map();
  for (const s of scrapes) for (const [k, v] of s ?? []) out.set(k, (out.get(k) ?? 0) + v);
  return out;
}
