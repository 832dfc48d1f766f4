/**
 * Counters in Prometheus' text exposition format, for a process that has no Temporal worker (and so no SDK meter
 * and no exporter of its own): the processor receiver. Deliberately small: counters with fixed label names, rendered
 * on request.
 */

export interface Counter<L extends string> {
  inc(labels: Record<L, string>, by?: number): void;
  /** The current value for these labels (0 when never incremented). */
  value(labels: Record<L, string>): number;
}

interface Series {
  name: string;
  help: string;
  labelNames: readonly string[];
  values: Map<string, { labels: Record<string, string>; value: number }>;
}

export class CounterRegistry {
  private readonly series: Series[] = [];

  counter<L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> {
    if (!/^[a-z_][a-z0-9_]*_total$/.test(name)) throw new Error(`counter ${name}: snake_case ending in _total`);
    const s: Series = { name, help, labelNames, values: new Map() };
    this.series.push(s);
    const key = (labels: Record<L, string>) => labelNames.map((l) => labels[l]).join('\u0000');
    return {
      inc(labels, by = 1) {
        const k = key(labels);
        const entry = s.values.get(k);
        if (entry) entry.value += by;
        else s.values.set(k, { labels: { ...labels }, value: by });
      },
      value: (labels) => s.values.get(key(labels))?.value ?? 0,
    };
  }

  /** Every counter, `# HELP`, `# TYPE` and one line per label set. */
  render(): string {
    const lines: string[] = [];
    for (const s of this.series) {
      lines.push(`# HELP ${s.name} ${s.help}`, `# TYPE ${s.name} counter`);
      for (const { labels, value } of s.values.values()) {
        const text = s.labelNames.map((l) => `${l}="${escapeLabel(labels[l] ?? '')}"`).join(',');
        lines.push(`${s.name}{${text}} ${value}`);
      }
    }
    return `${lines.join('\n')}\n`;
  }
}

function escapeLabel(value: string): string {
  return value.replaceAll('\\', '\\\\').replaceAll('\n', '\\n').replaceAll('"', '\\"');
}
