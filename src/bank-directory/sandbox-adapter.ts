import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import type { AccountLookup, AccountLookupResult, BankAvailability, BankDirectory, BankSide } from './port.ts';
import * as repository from './repository.ts';
import { findBank } from '../banks/service.ts';

/**
 * The sandbox bank's directory: the `BankDirectory` port over our own tables, for test mode only.
 * Each brand has its own directory, seeded with realistic Thai accounts on first use (a baseline every
 * merchant of the brand reads); each merchant adds or changes accounts for itself alone through
 * `POST /v1/test/bank/accounts`. Bank availability reads the shared `banks` table.
 *
 * A live adapter is not in scope here: live mode will use an HTTP directory provider, behind this same
 * port. Wiring decides which adapter serves which mode, so a live lookup reaching this adapter is a
 * programming error (InvariantViolation), never a business answer.
 */

type SeedAccount = Omit<repository.NewSandboxAccount, 'white_label_id' | 'merchant_id'>;

function personal(bank_code: string, account_number: string, holder_name_th: string, holder_name_en: string | null, status: repository.NewSandboxAccount['status'] = 'open'): SeedAccount {
  return { bank_code, account_number, holder_name_th, holder_name_en, account_type: 'personal', status };
}

function business(bank_code: string, account_number: string, holder_name_th: string, holder_name_en: string | null): SeedAccount {
  return { bank_code, account_number, holder_name_th, holder_name_en, account_type: 'business', status: 'open' };
}

/**
 * What every brand's sandbox directory starts with. Names are stored without honorifics, as Thai
 * banks' directories return them; two holders have no English name (common for older accounts).
 * Commercial banks use 10-digit numbers, the Government Savings Bank 12.
 */
export const SANDBOX_SEED_ACCOUNTS: readonly SeedAccount[] = [
  personal('002', '1234567890', 'สมชาย ใจดี', 'Somchai Jaidee'),
  personal('002', '2345678901', 'วิภาวรรณ ศรีสุข', 'Wipawan Srisuk'),
  business('002', '3456789012', 'บริษัท ตัวอย่าง จำกัด', 'Example Company Limited'),
  personal('004', '0123456789', 'สมหญิง รักไทย', 'Somying Rakthai'),
  personal('004', '0987654321', 'ประเสริฐ มั่นคง', 'Prasert Mankong'),
  business('004', '1112223334', 'ห้างหุ้นส่วนจำกัด รุ่งเรืองการค้า', 'Rungruang Trading Limited Partnership'),
  personal('006', '9876543210', 'อนุชา แก้วมณี', 'Anucha Kaewmanee', 'closed'),
  personal('006', '4445556667', 'กนกวรรณ ทองดี', 'Kanokwan Thongdee'),
  personal('011', '5556667778', 'ธนพล วงศ์สวัสดิ์', 'Thanaphon Wongsawat'),
  personal('011', '6667778889', 'ณัฐธิดา บุญมา', 'Natthida Boonma', 'frozen'),
  personal('014', '1472583690', 'พิชัย สุวรรณรัตน์', 'Pichai Suwannarat'),
  business('014', '3692581470', 'บริษัท สยามซอฟต์ จำกัด', 'Siam Soft Company Limited'),
  personal('014', '7778889990', 'จันทร์เพ็ญ แสงทอง', null),
  personal('025', '8889990001', 'วรวุฒิ ประเสริฐศักดิ์', 'Worawut Prasertsak'),
  personal('025', '9990001112', 'สุภาพร เจริญผล', 'Supaporn Charoenphon'),
  personal('030', '020012345678', 'มาลี พึ่งบุญ', 'Malee Phuengboon'),
  personal('030', '020098765432', 'บุญมี ชาวนา', null),
  personal('069', '2001234567', 'กิตติพงษ์ อินทรประเสริฐ', 'Kittipong Intaraprasert'),
  business('069', '2007654321', 'บริษัท กรุงเทพ เทรดดิ้ง จำกัด', 'Bangkok Trading Company Limited'),
  personal('069', '2009998887', 'ศิริพร ใจงาม', 'Siriporn Jaingam'),
];

/**
 * Seeds a brand's sandbox directory; idempotent (INSERT … ON CONFLICT DO NOTHING), and an account a
 * merchant has changed keeps its change. Returns how many accounts were inserted.
 */
export async function seedSandboxDirectory(db: Queryable, white_label_id: string, now: Date = new Date()): Promise<number> {
  return repository.insertMissingAccounts(
    db,
    SANDBOX_SEED_ACCOUNTS.map((account) => ({ white_label_id, merchant_id: repository.BASELINE_MERCHANT_ID, ...account })),
    now,
  );
}

/**
 * Seeds on first use: a brand whose directory is still empty gets the seed. The check reads the
 * table rather than a memory flag, so a seed rolled back with its transaction runs again next time.
 */
export async function ensureSandboxDirectory(db: Queryable, white_label_id: string, now: Date): Promise<void> {
  if (!(await repository.directoryExists(db, white_label_id))) await seedSandboxDirectory(db, white_label_id, now);
}

export class SandboxBankDirectory implements BankDirectory {
  /** `db` is the database, or the caller's transaction when the lookup is part of a write. */
  constructor(
    private readonly db: Queryable,
    private readonly clock: Clock,
  ) {}

  async lookupAccount(request: AccountLookup): Promise<AccountLookupResult> {
    invariant(!request.livemode, 'the sandbox bank directory serves test mode only; live lookups belong to the live adapter');
    const bank = await findBank(this.db, request.bank_code);
    if (!bank || !bank.available) return { outcome: 'bank_unavailable' };
    await ensureSandboxDirectory(this.db, request.white_label_id, this.clock.now());
    const account = await repository.findAccount(this.db, request);
    if (!account) return { outcome: 'not_found' };
    return {
      outcome: 'found',
      holder_name_th: account.holder_name_th,
      holder_name_en: account.holder_name_en,
      account_status: account.status,
    };
  }

  async bankAvailability(request: { bank_code: string; side: BankSide }): Promise<BankAvailability> {
    const bank = await findBank(this.db, request.bank_code);
    if (!bank) return { available: false };
    if (bank.available && bank.sides.includes(request.side)) return { available: true };
    return bank.message_th ? { available: false, message_th: bank.message_th } : { available: false };
  }
}
