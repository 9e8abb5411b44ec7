/**
 * Reads a /metrics answer with a real Prometheus text-format parser (parse-prometheus-text-format,
 * prom2json-compatible output), and picks samples out of it by name and labels.
 *
 * That parser reads counters, gauges and unlabelled histograms right, but flattens the series of a
 * labelled histogram into one sample (buckets of every label set mixed, count and sum dropped). So
 * one histogram series is read by handing the parser that series' lines alone, its labels
 * (but `le`) removed: an unlabelled histogram, which it reads right.
 */
import parsePrometheusTextFormat from 'parse-prometheus-text-format';

interface Sample {
  value?: string;
  labels?: Record<string, string>;
  buckets?: Record<string, string>;
  count?: string;
  sum?: string;
}

export interface Family {
  name: string;
  help: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: Sample[];
}

export class Scrape {
  readonly families: Map<string, Family>;
  constructor(readonly text: string) {
    this.families = new Map((parsePrometheusTextFormat(text) as Family[]).map((f) => [f.name, f]));
  }

  family(name: string): Family | undefined {
    return this.families.get(name);
  }

  private sample(name: string, labels: Record<string, string>): Sample | undefined {
    return this.families.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  }

  /** A counter's or gauge's value for the series with these labels; 0 when absent (a counter not yet incremented). */
  value(name: string, labels: Record<string, string> = {}): number {
    const v = this.sample(name, labels)?.value;
    return v === undefined ? 0 : Number(v);
  }

  /** Whether a series with these labels is exposed. */
  has(name: string, labels: Record<string, string> = {}): boolean {
    return this.sample(name, labels) !== undefined;
  }

  /** A histogram's observation count for the series with exactly these labels; 0 when absent. */
  count(name: string, labels: Record<string, string> = {}): number {
    const type = this.families.get(name)?.type;
    if (type !== undefined && type !== 'HISTOGRAM') throw new Error(`${name} is not a histogram`);
    const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);
    const lines = [`# TYPE ${name} histogram`];
    for (const line of this.text.split('\n')) {
      const m = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!m || ![`${name}_bucket`, `${name}_sum`, `${name}_count`].includes(m[1]!)) continue;
      const parts = (m[2] ?? '').split(/,(?=\w+=")/);
      const rest = parts.filter((p) => p !== '' && !p.startsWith('le='));
      if (rest.length !== wanted.length || !wanted.every((w) => rest.includes(w))) continue;
      const le = parts.find((p) => p.startsWith('le='));
      lines.push(`${m[1]}${le ? `{${le}}` : ''} ${m[3]}`);
    }
    const [family] = parsePrometheusTextFormat(lines.join('\n') + '\n') as Family[];
    const c = family?.metrics[0]?.count;
    return c === undefined ? 0 : Number(c);
  }
}

/** GET /metrics with the token; fails unless the answer is 200 in the Prometheus text format. */
export async function scrape(baseUrl: string, token: string): Promise<Scrape> {
  const res = await fetch(new URL('/metrics', baseUrl), { headers: { authorization: `Bearer ${token}` } });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${await res.text()}`);
  if (!res.headers.get('content-type')?.startsWith('text/plain; version=0.0.4'))
    throw new Error(`/metrics content-type ${res.headers.get('content-type')}`);
  return new Scrape(await res.text());
}
