import type { Config } from '../platform/config.ts';
import type { Queryable } from '../platform/db.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { CheckoutLinks } from './links.ts';

/**
 * Where a brand's checkout pages are served, and so each order's `checkout_url`. The deposit service asks
 * for an order's address when it answers (its constructor is given this), and the checkout pages ask for the
 * origin a session lives on; neither needs the rest of the checkout.
 */
/** How long a process trusts its copy of a brand's checkout origin (an operator's change reaches every process within this). */
export const BRAND_ORIGIN_TTL_MS = 10_000;

export interface CheckoutAddressDependencies {
  config: Pick<Config, 'checkout_base_url'>;
  tenancy: Pick<TenancyService, 'brandCheckoutBaseUrl'>;
  links: CheckoutLinks;
  /** The service's own address: the default checkout origin. */
  public_base_url: () => string;
}

export class CheckoutAddresses {
  private readonly brandOrigins = new Map<string, { origin: string | null; read_at: number }>();

  constructor(private readonly deps: CheckoutAddressDependencies) {}

  /** The deployment's checkout origin: CHECKOUT_BASE_URL, else the origin of the service's own address. */
  defaultOrigin(): string {
    return this.deps.config.checkout_base_url ?? new URL(this.deps.public_base_url()).origin;
  }

  /**
   * The origin of a brand's checkout pages: its own when it has one, else the deployment's. A process
   * keeps each brand's answer for BRAND_ORIGIN_TTL_MS (process time: a freshness bound, not business
   * time), so that creating and reading orders does not read the brand every time.
   */
  async originFor(db: Queryable, white_label_id: string): Promise<string> {
    const cached = this.brandOrigins.get(white_label_id);
    const now = performance.now();
    if (cached && now - cached.read_at < BRAND_ORIGIN_TTL_MS) return cached.origin ?? this.defaultOrigin();
    const brand = await this.deps.tenancy.brandCheckoutBaseUrl(db, white_label_id);
    const origin = brand?.checkout_base_url ?? null;
    if (this.brandOrigins.size > 10_000) this.brandOrigins.clear();
    this.brandOrigins.set(white_label_id, { origin, read_at: now });
    return origin ?? this.defaultOrigin();
  }

  /** Forgets a brand's cached origin in this process (after an operator changed it here). */
  forgetBrandOrigin(white_label_id: string): void {
    this.brandOrigins.delete(white_label_id);
  }

  /** The order's `checkout_url` (the deposit service asks for it in its own transaction). */
  async checkoutUrl(db: Queryable, order: { white_label_id: string; deposit_id: string }): Promise<string> {
    return this.deps.links.url(await this.originFor(db, order.white_label_id), order.white_label_id, order.deposit_id);
  }

}
