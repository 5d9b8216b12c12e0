import { z } from 'zod';

/** Field rules of tenancy input, shared by the back-office routes and the CLI's direct backend. */
export const nameSchema = z.string().trim().min(1).max(200);
export const idText = z.string().min(1).max(100);
/** A staff identity's id (stf_ + ULID), as a credential's creation names the person who holds it. */
export const staffIdText = z.string().regex(/^stf_[0-9A-HJKMNP-TV-Z]{26}$/);
