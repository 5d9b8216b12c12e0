import { z } from 'zod';

/**
 * Building blocks of the response schemas that the routes declare for the OpenAPI document
 * (src/openapi/). Each module declares the schemas of the resources it owns (its `resources.ts`) from
 * these, and proves at compile time that a schema describes the view type its service returns.
 */

/**
 * True when `Schema` describes `View`: every value of the view type is a valid value of the schema (so a
 * required field the view may omit, a null the schema does not allow, or a narrower type fails), and the
 * two name the same top-level fields. Fields nested deeper that the schema does not name are caught at
 * run time instead: response objects allow no other properties, and the test harness validates every
 * answer of the suite against the document.
 */
export type Describes<Schema extends z.ZodType, View> = [View] extends [z.output<Schema>]
  ? [Exclude<keyof z.output<Schema>, keyof View> | Exclude<keyof View, keyof z.output<Schema>>] extends [never]
    ? true
    : false
  : false;

/** Every timestamp of the API (spec, conventions rule 2). One component, referenced everywhere. */
export const timestampSchema = z
  .iso.datetime({ precision: 3 })
  .meta({ id: 'timestamp', description: 'RFC 3339 UTC ending in `Z` with exactly 3 millisecond digits.' });

/** An amount in satang (spec, conventions rule 1): an integer, never a float. */
export const minorSchema = z.number().int().meta({ description: 'Integer satang (THB 1.00 = 100).' });

export const currencyResponseSchema = z.literal('THB');

/**
 * An open enum (spec, conventions rule 5): documented as a string with the values known today, because
 * a later version may add values without a breaking change.
 */
export function openEnum(known: readonly string[], description?: string) {
  return z.string().meta({ description: `${description ? `${description} ` : ''}Open enum: keep a default branch. Known values: ${known.map((value) => `\`${value}\``).join(', ')}.` });
}

/** `{object: "list", data, has_more, next_cursor}`: a page of a list with an opaque cursor. */
export function cursorListSchema<Item extends z.ZodType>(item: Item) {
  return z.object({ object: z.literal('list'), data: z.array(item), has_more: z.boolean(), next_cursor: z.string().nullable() });
}

/** `{object: "list", data, has_more}`: a page of a list paged by `starting_after` or not paged further. */
export function pagedListSchema<Item extends z.ZodType>(item: Item) {
  return z.object({ object: z.literal('list'), data: z.array(item), has_more: z.boolean() });
}

/** `{object: "list", data}`: a whole list. */
export function listSchema<Item extends z.ZodType>(item: Item) {
  return z.object({ object: z.literal('list'), data: z.array(item) });
}
