import client from 'prom-client';

/**
 * Prometheus metrics. One registry per service instance so that tests building several services in
 * one process do not collide on metric names.
 */
export interface Metrics {
  registry: client.Registry;
  http_requests_total: client.Counter<'method' | 'route' | 'status'>;
  http_request_duration_seconds: client.Histogram<'method' | 'route'>;
  jobs_total: client.Counter<'task' | 'outcome'>;
  job_duration_seconds: client.Histogram<'task'>;
  events_written_total: client.Counter<'type'>;
  slips_processed_total: client.Counter<'outcome' | 'source'>;
  slip_processing_delay_seconds: client.Histogram;
  http_requests_shed_total: client.Counter<'load_class'>;
  load_shedding_level: client.Gauge;
  http_connections_open: client.Gauge;
  http_connections_refused_total: client.Counter;
  http_request_bodies_refused_total: client.Counter<'reason'>;
  http_request_body_buffer_bytes: client.Gauge;
  slip_uploads_in_progress: client.Gauge;
  slip_uploads_waiting: client.Gauge;
  slip_uploads_refused_total: client.Counter<'reason'>;
  slip_provider_request_duration_seconds: client.Histogram<'provider' | 'white_label_id'>;
  slip_provider_lookups_total: client.Counter<'provider' | 'white_label_id' | 'slot' | 'outcome' | 'reason'>;
  slip_provider_remaining_quota: client.Gauge<'provider' | 'white_label_id' | 'slot'>;
  slip_provider_alerts_total: client.Counter<'provider' | 'white_label_id' | 'reason'>;
}

/**
 * The slip-verification providers' metrics (src/slip-providers/). `white_label_id` is a label: its values
 * are bounded by the number of brands with a provider configured (a few dozen, set by platform and brand
 * administrators, never by merchants or payers), times three providers and two slots.
 */
function slipProviderMetrics(registry: client.Registry) {
  return {
    slip_provider_request_duration_seconds: new client.Histogram({
      name: 'slip_provider_request_duration_seconds',
      help: 'One verification asked of a slip provider, retries included, by provider and brand',
      labelNames: ['provider', 'white_label_id'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      registers: [registry],
    }),
    slip_provider_lookups_total: new client.Counter({
      name: 'slip_provider_lookups_total',
      help: 'Slip provider answers by provider, brand, slot (primary, fallback) and outcome (found, not_found, unavailable, bank_disabled) with its reason',
      labelNames: ['provider', 'white_label_id', 'slot', 'outcome', 'reason'],
      registers: [registry],
    }),
    slip_provider_remaining_quota: new client.Gauge({
      name: 'slip_provider_remaining_quota',
      help: 'Verifications left on a brand provider account, as its last connection test said (0 after a quota-exhausted answer; absent when unlimited)',
      labelNames: ['provider', 'white_label_id', 'slot'],
      registers: [registry],
    }),
    slip_provider_alerts_total: new client.Counter({
      name: 'slip_provider_alerts_total',
      help: 'Operator alerts of slip providers (quota_exhausted, credentials_refused, circuit_open), by provider and brand',
      labelNames: ['provider', 'white_label_id', 'reason'],
      registers: [registry],
    }),
  };
}

export function createMetrics(): Metrics {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  return {
    registry,
    http_requests_total: new client.Counter({
      name: 'http_requests_total',
      help: 'HTTP requests answered, by route template and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    }),
    http_request_duration_seconds: new client.Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by route template',
      labelNames: ['method', 'route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    jobs_total: new client.Counter({
      name: 'jobs_total',
      help: 'Durable jobs run, by task and outcome (succeeded, retried, failed)',
      labelNames: ['task', 'outcome'],
      registers: [registry],
    }),
    job_duration_seconds: new client.Histogram({
      name: 'job_duration_seconds',
      help: 'Durable job run time by task',
      labelNames: ['task'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15],
      registers: [registry],
    }),
    events_written_total: new client.Counter({
      name: 'events_written_total',
      help: 'Events written to the outbox, by type',
      labelNames: ['type'],
      registers: [registry],
    }),
    slips_processed_total: new client.Counter({
      name: 'slips_processed_total',
      help: 'Slip receipts processed, by outcome (settled, under_review, unreadable, leg_paid, …) and where the reference came from',
      labelNames: ['outcome', 'source'],
      registers: [registry],
    }),
    slip_processing_delay_seconds: new client.Histogram({
      name: 'slip_processing_delay_seconds',
      help: 'From the 202 of a slip upload to the end of its processing (the outcome written)',
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 15, 60, 300, 900],
      registers: [registry],
    }),
    http_requests_shed_total: new client.Counter({
      name: 'http_requests_shed_total',
      help: 'Requests refused with 503 by load shedding, by load class (new_deposit, write, read)',
      labelNames: ['load_class'],
      registers: [registry],
    }),
    load_shedding_level: new client.Gauge({
      name: 'load_shedding_level',
      help: 'Load shedding level of this process: 0 none, 1 new deposits, 2 and other writes, 3 and reads',
      registers: [registry],
    }),
    http_connections_open: new client.Gauge({
      name: 'http_connections_open',
      help: 'HTTP connections this process holds open (HTTP_MAX_CONNECTIONS is the cap)',
      registers: [registry],
    }),
    http_connections_refused_total: new client.Counter({
      name: 'http_connections_refused_total',
      help: 'Connections answered 503 and closed because the process held HTTP_MAX_CONNECTIONS',
      registers: [registry],
    }),
    http_request_bodies_refused_total: new client.Counter({
      name: 'http_request_bodies_refused_total',
      help: 'Request bodies not read whole, by reason (too_large, deadline, too_slow, aborted, budget_exhausted)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    http_request_body_buffer_bytes: new client.Gauge({
      name: 'http_request_body_buffer_bytes',
      help: 'Bytes reserved by request bodies being buffered now (HTTP_BODY_BUFFER_BYTES is the budget)',
      registers: [registry],
    }),
    slip_uploads_in_progress: new client.Gauge({
      name: 'slip_uploads_in_progress',
      help: 'Slip uploads being read and stored now (SLIP_UPLOAD_CONCURRENCY is the bound)',
      registers: [registry],
    }),
    slip_uploads_waiting: new client.Gauge({
      name: 'slip_uploads_waiting',
      help: 'Slip uploads queued for a slot (SLIP_UPLOAD_MAX_WAITING is the bound)',
      registers: [registry],
    }),
    slip_uploads_refused_total: new client.Counter({
      name: 'slip_uploads_refused_total',
      help: 'Slip uploads answered 503 slip_intake_unavailable before reading, by reason (queue_full, wait_timed_out)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    ...slipProviderMetrics(registry),
  };
}
