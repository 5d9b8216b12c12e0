import { z } from 'zod';
import { pagedListSchema, timestampSchema, type Describes } from '../http/response-fields.ts';
import type { BackofficeTestClockView, TestClockView } from './service.ts';

/** A sandbox test clock, as its merchant and as the brand's staff read it. */
const testClockFields = {
  id: z.string(),
  object: z.literal('test_clock'),
  version: z.number().int(),
  name: z.string().nullable(),
  frozen_time: timestampSchema,
  status: z.enum(['ready', 'advancing']),
  status_details: z.object({ advancing: z.object({ target_frozen_time: timestampSchema }) }).optional().meta({ description: 'Present while advancing.' }),
  attached: z.boolean(),
  last_advance: z
    .object({
      requested_frozen_time: timestampSchema,
      reached_frozen_time: timestampSchema,
      job_runs: z.number().int(),
      outcome: z.enum(['completed', 'job_limit_reached']),
      finished_at: timestampSchema,
    })
    .nullable(),
  livemode: z.literal(false),
  created_at: timestampSchema,
};

export const testClockSchema = z.object(testClockFields).meta({ id: 'test_clock' });

export const backofficeTestClockSchema = z
  .object({ ...testClockFields, white_label_id: z.string(), merchant_id: z.string(), updated_at: timestampSchema })
  .meta({ id: 'backoffice_test_clock' });

export const testClockListSchema = pagedListSchema(testClockSchema);
export const backofficeTestClockListSchema = pagedListSchema(backofficeTestClockSchema);

/** The views carry an index signature (for the transition helper); the field list is compared without it. */
type Known<View> = { [Key in keyof View as string extends Key ? never : Key]: View[Key] };
const _clock: Describes<typeof testClockSchema, Known<TestClockView>> = true;
const _backofficeClock: Describes<typeof backofficeTestClockSchema, Known<BackofficeTestClockView>> = true;
void [_clock, _backofficeClock];
