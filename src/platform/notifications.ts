import pg from 'pg';
import { invariant } from './assert.ts';
import type { Logger } from './logger.ts';
import { parseMultiHostUrl } from './multi-host.ts';

/**
 * A LISTEN on one PostgreSQL channel, on a connection of its own: not from the pool, because a pooled
 * connection goes back after each transaction, and a LISTEN lives as long as its session (which is also
 * why it cannot go through PgBouncer's transaction pooling: DATABASE_LISTEN_URL names the server itself).
 *
 * When the connection breaks (a restart, a failover, pg_terminate_backend), it is opened again after a
 * backoff that doubles from `minimum_backoff_ms` to `maximum_backoff_ms`, and LISTEN is sent again.
 * Notifications sent while no session listened are lost, so `on_listening` is called after every LISTEN,
 * the first included: the caller looks once for what it may have missed (the worker polls).
 *
 * A multi-host URL (src/platform/multi-host.ts, a primary and its standby) is tried one host per attempt,
 * moving to the next after a failure. A standby refuses LISTEN ("cannot execute LISTEN during recovery"),
 * and only the primary, where the commits happen, sends notifications, so the attempts settle on the primary
 * and follow it after a failover.
 */
export interface NotificationListenerOptions {
  connection_string: string;
  /** A plain identifier: it is written into the LISTEN statement. */
  channel: string;
  on_notification: (payload: string) => void;
  on_listening: () => void;
  logger: Logger;
  /** The first wait before reconnecting; default 100 ms. */
  minimum_backoff_ms?: number;
  /** The longest wait between attempts; default 5 s. */
  maximum_backoff_ms?: number;
}

const DEFAULT_MINIMUM_BACKOFF_MS = 100;
const DEFAULT_MAXIMUM_BACKOFF_MS = 5_000;
/** The session's name in pg_stat_activity, for an operator looking for the listening sessions. */
export const LISTENER_APPLICATION_NAME = 'payment-service-listener';

export class NotificationListener {
  private client: pg.Client | null = null;
  private running = false;
  private reconnect_timer: NodeJS.Timeout | null = null;
  private backoff_ms: number;
  private readonly minimum_backoff_ms: number;
  private readonly maximum_backoff_ms: number;
  /** The URL of each host to try, in order; one URL unless DATABASE_LISTEN_URL lists several hosts. */
  private readonly host_urls: readonly string[];
  private host_index = 0;
  private readonly connect_timeout_ms: number | undefined;
  /** Sessions that reached LISTEN since start: 1 after the first, one more per reconnect. */
  listens = 0;

  constructor(private readonly options: NotificationListenerOptions) {
    invariant(/^[a-z_][a-z0-9_]*$/.test(options.channel), 'a channel is a plain lower-case identifier');
    this.minimum_backoff_ms = options.minimum_backoff_ms ?? DEFAULT_MINIMUM_BACKOFF_MS;
    this.maximum_backoff_ms = options.maximum_backoff_ms ?? DEFAULT_MAXIMUM_BACKOFF_MS;
    invariant(this.minimum_backoff_ms >= 1 && this.maximum_backoff_ms >= this.minimum_backoff_ms, 'the backoff bounds are ordered and positive');
    this.backoff_ms = this.minimum_backoff_ms;
    const hosts = parseMultiHostUrl(options.connection_string);
    this.host_urls = hosts === null ? [options.connection_string] : hosts.hosts.map((host) => hosts.urlOf(host));
    this.connect_timeout_ms = hosts?.connect_timeout_ms;
  }

  /** True while a session is listening. */
  get listening(): boolean {
    return this.client !== null;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    void this.connect();
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.reconnect_timer !== null) clearTimeout(this.reconnect_timer);
    this.reconnect_timer = null;
    const client = this.client;
    this.client = null;
    if (client !== null) await client.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.host_urls[this.host_index],
      ...(this.connect_timeout_ms === undefined ? {} : { connectionTimeoutMillis: this.connect_timeout_ms }),
      application_name: LISTENER_APPLICATION_NAME,
      // A session that is only read from would not notice a peer that vanished without a word (a machine
      // lost, a network cut); keepalives make the kernel find out, and the connection then ends and reopens.
      keepAlive: true,
    });
    let lost = false;
    const onLost = (error?: unknown) => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = null;
      // The next attempt goes to the next host of a list (the standby may have become the primary).
      this.host_index = (this.host_index + 1) % this.host_urls.length;
      if (!this.running) return;
      this.options.logger.warn({ err: error, channel: this.options.channel, retry_in_ms: this.backoff_ms }, 'the notification listener lost its connection; reconnecting');
      client.end().catch(() => undefined);
      this.scheduleReconnect();
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (message) => {
      if (message.channel === this.options.channel) this.options.on_notification(message.payload ?? '');
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${this.options.channel}`);
    } catch (error) {
      onLost(error);
      return;
    }
    if (!this.running || lost) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.backoff_ms = this.minimum_backoff_ms;
    this.listens += 1;
    this.options.on_listening();
  }

  private scheduleReconnect(): void {
    if (!this.running || this.reconnect_timer !== null) return;
    const wait_ms = this.backoff_ms;
    this.backoff_ms = Math.min(this.maximum_backoff_ms, this.backoff_ms * 2);
    this.reconnect_timer = setTimeout(() => {
      this.reconnect_timer = null;
      if (this.running) void this.connect();
    }, wait_ms);
    this.reconnect_timer.unref();
  }
}
