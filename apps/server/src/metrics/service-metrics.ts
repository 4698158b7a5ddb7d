import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { DECIDING_ROUTES, DECISION_OUTCOMES, LIMITER_STORE_NAMES, type HttpObserver, type LimiterStoreName } from '@ets/adapters-http';
import { NOT_SENT_REASONS, UNKNOWN_REASONS, type Egress, type IntentState, type Signer } from '@ets/domain';

/**
 * The service's Prometheus metrics (prom-client), in one registry per server. They are fed from
 * the edges only: decorators around ports (the Signer, the stores, Egress) for latency and
 * outcome, the HTTP layer's answer hook for requests and decisions, the rate limiters for
 * refusals, and the intent store read at scrape time. The domain knows nothing of them.
 *
 * Every label has a bounded set of values: route patterns (never raw paths), method names of the
 * ports, outcomes and states from fixed lists.
 */
export const INTENT_STATES: readonly IntentState[] = ['PREPARED', 'RELEASED', 'FINALIZED', 'ERRORED', 'RESOLVED'];

/** The status classes an answered outbound call is counted by. */
const STATUS_CLASSES = ['2xx', '3xx', '4xx', '5xx'] as const;

/** Default metrics of prom-client that are gauges with a counter's `_total` suffix. */
const GAUGES_NAMED_AS_COUNTERS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export class ServiceMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly requestSeconds: Histogram<'method' | 'route'>;
  private readonly decisions: Counter<'route' | 'outcome'>;
  private readonly signingSeconds: Histogram<'operation'>;
  private readonly storageSeconds: Histogram<'store' | 'operation'>;
  private readonly refusals: Counter<'limiter'>;
  private readonly egressCalls: Counter<'operation' | 'outcome' | 'reason'>;

  constructor(countIntents: () => Promise<Partial<Record<IntentState, number>>>) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    // prom-client names three gauges like counters (`nodejs_active_*_total`), which Prometheus'
    // own lint (`promtool check metrics`) flags and which rate() would misread. Their by-type
    // gauges (`nodejs_active_handles`, `…_requests`, `…_resources`) stay: sum() gives the total.
    for (const name of GAUGES_NAMED_AS_COUNTERS) this.registry.removeSingleMetric(name);
    const counter = <L extends string>(name: string, help: string, labelNames: L[]) => new Counter<L>({ name, help, labelNames, registers });
    const latency = <L extends string>(name: string, help: string, labelNames: L[]) => new Histogram<L>({ name, help, labelNames, buckets: LATENCY_BUCKETS, registers });
    this.requests = counter('ets_http_requests_total', 'HTTP answers, by method, route pattern and status.', ['method', 'route', 'status']);
    this.requestSeconds = latency('ets_http_request_duration_seconds', 'Time from routing to the end of the answer, by method and route pattern.', ['method', 'route']);
    this.decisions = counter(
      'ets_decisions_total',
      'Policy decisions answered by POST /execute and POST /transactions: approve, reject (refused by policy), override (approved, waiting for a human).',
      ['route', 'outcome'],
    );
    this.signingSeconds = latency('ets_signing_duration_seconds', 'Time to sign, by operation (sign: a record; signText: a chain link).', ['operation']);
    this.storageSeconds = latency('ets_storage_duration_seconds', "Time of a store operation (the port's method), by store; failures included.", ['store', 'operation']);
    this.refusals = counter('ets_rate_limit_refusals_total', 'Requests refused with 429, by limiter.', ['limiter']);
    this.egressCalls = counter(
      'ets_egress_calls_total',
      'Outbound calls (external connectors, signal sources), by operation and outcome (answered, not-sent, unknown) with its reason.',
      ['operation', 'outcome', 'reason'],
    );
    // Every known series at 0 from the start, so a scrape before the first event shows them and
    // rate() and absent() alerts work from the first scrape.
    for (const route of DECIDING_ROUTES) for (const outcome of DECISION_OUTCOMES) this.decisions.inc({ route, outcome }, 0);
    for (const limiter of LIMITER_STORE_NAMES) this.refusals.inc({ limiter }, 0);
    for (const reason of STATUS_CLASSES) this.egressCalls.inc({ operation: 'postJson', outcome: 'answered', reason }, 0);
    for (const reason of NOT_SENT_REASONS) {
      this.egressCalls.inc({ operation: 'postJson', outcome: 'not-sent', reason }, 0);
      this.egressCalls.inc({ operation: 'check', outcome: 'refused', reason }, 0);
    }
    for (const reason of UNKNOWN_REASONS) this.egressCalls.inc({ operation: 'postJson', outcome: 'unknown', reason }, 0);
    this.egressCalls.inc({ operation: 'check', outcome: 'ok', reason: '' }, 0);
    new Gauge({
      name: 'ets_execution_intents',
      help: 'Execution intents by state, read from the database at scrape time (one deployment-wide value: every instance reports the same).',
      labelNames: ['state'],
      registers,
      async collect() {
        const counts = await countIntents();
        for (const state of INTENT_STATES) this.set({ state }, counts[state] ?? 0);
      },
    });
  }

  /** The text exposition of every metric. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  readonly http: HttpObserver = {
    answered: ({ method, route, status, seconds }) => {
      this.requests.inc({ method, route, status: String(status) });
      this.requestSeconds.observe({ method, route }, seconds);
    },
    decided: ({ route, outcome }) => this.decisions.inc({ route, outcome }),
  };

  rateLimitRefused = (limiter: LimiterStoreName): void => {
    this.refusals.inc({ limiter });
  };

  signer(signer: Signer): Signer {
    return timed(signer, (operation, seconds) => this.signingSeconds.observe({ operation }, seconds));
  }

  /** A store with every method timed under `store`. */
  store<T extends object>(store: string, target: T): T {
    return timed(target, (operation, seconds) => this.storageSeconds.observe({ store, operation }, seconds));
  }

  egress(egress: Egress): Egress {
    const calls = this.egressCalls;
    return {
      async check(endpoint, timeoutMs) {
        const r = await egress.check(endpoint, timeoutMs);
        calls.inc({ operation: 'check', outcome: r.ok ? 'ok' : 'refused', reason: r.ok ? '' : r.reason });
        return r;
      },
      async postJson(request) {
        const r = await egress.postJson(request);
        calls.inc({ operation: 'postJson', outcome: r.outcome, reason: r.outcome === 'answered' ? String(Math.floor(r.status / 100)) + 'xx' : r.reason });
        return r;
      },
    };
  }
}

/**
 * `target` with each method's time (sync or async, success or failure) reported as
 * `observe(methodName, seconds)`. Everything else passes through untouched.
 */
export function timed<T extends object>(target: T, observe: (operation: string, seconds: number) => void): T {
  return new Proxy(target, {
    get(t, prop) {
      const value: unknown = Reflect.get(t, prop, t);
      if (typeof value !== 'function' || typeof prop !== 'string' || prop === 'constructor') return value;
      return (...args: unknown[]) => {
        const started = process.hrtime.bigint();
        const done = () => observe(prop, Number(process.hrtime.bigint() - started) / 1e9);
        let result: unknown;
        try {
          result = (value as (...a: unknown[]) => unknown).apply(t, args);
        } catch (e) {
          done();
          throw e;
        }
        if (result instanceof Promise) return result.finally(done);
        done();
        return result;
      };
    },
  });
}
