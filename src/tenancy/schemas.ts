import { z } from 'zod';

/** Field rules of tenancy input, shared by the back-office routes and the CLI's direct backend. */
export const nameSchema = z.string().trim().min(1).max(200);
export const idText = z.string().min(1).max(100);
