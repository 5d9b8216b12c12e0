/**
 * How Thai banks print the two parties of a transfer on a slip and in their verification answers: the
 * account number with most digits hidden, the name shortened to a first name and the first letter of
 * the surname. The sandbox bank prints exactly this way, on its slip images and in its answers, so
 * that the matching rules are exercised against the same masks a live provider returns.
 */

export type PrintedHonorific = 'นาย' | 'นาง' | 'นางสาว' | 'MR.' | 'MRS.' | 'MS.';

/** The character that stands for a hidden digit; one of the port's MASK_CHARACTERS. */
const HIDDEN = 'x';
/** Digits shown: four, the way K PLUS and most Thai banks print an account. */
const VISIBLE_DIGIT_COUNT = 4;
/** Shorter numbers are not real Thai accounts; showing four of five digits would show nearly all of it. */
const MINIMUM_LENGTH_WITH_VISIBLE_DIGITS = 6;
/** Longer text is not an account number; the bound keeps the work small whatever the caller passes. */
const MAXIMUM_ACCOUNT_LENGTH = 32;
const SEPARATOR_PATTERN = /[\s-]/g;
const THAI_SCRIPT_PATTERN = /[\u0E00-\u0E7F]/;
const WHITESPACE_PATTERN = /\s+/;

/**
 * The account number as a slip prints it.
 *
 * The rule, for an account of n characters (separators removed first):
 * - the four characters just before the last one (positions n-4 to n-1, counting from 1) are shown, every
 *   other one is printed as `x`. The last digit is the check digit, which banks never show;
 * - the characters are grouped the way Thai banks write a 10-digit account, `123-4-56789-0` (branch,
 *   account type, serial, check digit): the last character alone, the five before it together (one hidden
 *   and the four visible), and what remains in front as a group of three and a group of the rest;
 * - so 10 digits `1234567890` print as `xxx-x-x6789-x` (K PLUS style: positions 6–9 visible), 12 digits
 *   `123456789012` as `xxx-xxx-x8901-x`, 8 digits as `xx-x4567-x`;
 * - below six characters nothing is shown: `xxxxx`, with no grouping.
 */
export function printedAccount(account_number: string): string {
  const characters = Array.from(account_number.replace(SEPARATOR_PATTERN, '').slice(0, MAXIMUM_ACCOUNT_LENGTH));
  const length = characters.length;
  if (length < MINIMUM_LENGTH_WITH_VISIBLE_DIGITS) return HIDDEN.repeat(length);
  const first_visible = length - 1 - VISIBLE_DIGIT_COUNT;
  const printed = characters.map((character, index) => (index >= first_visible && index < length - 1 ? character : HIDDEN)).join('');
  const check_group = printed.slice(length - 1);
  const serial_group = printed.slice(length - 1 - (VISIBLE_DIGIT_COUNT + 1), length - 1);
  const leading = printed.slice(0, length - 1 - (VISIBLE_DIGIT_COUNT + 1));
  const leading_groups = leading.length > 3 ? [leading.slice(0, 3), leading.slice(3)] : leading.length > 0 ? [leading] : [];
  return [...leading_groups, serial_group, check_group].join('-');
}

const thaiGraphemes = new Intl.Segmenter('th', { granularity: 'grapheme' });

/** The first user-perceived character: a Thai consonant with its vowel and tone marks stays whole. */
function firstGrapheme(text: string): string {
  for (const segment of thaiGraphemes.segment(text)) return segment.segment;
  return '';
}

/** Titles a stored name may already start with; they are printed as the honorific, never as the first name. */
const LEADING_TITLES: ReadonlySet<string> = new Set(['นาย', 'นาง', 'นางสาว', 'น.ส.', 'MR.', 'MRS.', 'MS.', 'MR', 'MRS', 'MS', 'MISS']);

/**
 * The holder's name as a slip prints it: the honorific (when known), the first name in full, and the
 * first character of the surname. A Thai name (any Thai letter in it) keeps its script and cuts the
 * surname at a grapheme cluster, so `สมชาย สุขใจ` gives `สมชาย สุ`, never a lone vowel mark; a name in
 * Latin letters is printed in upper case, `MR. SOMCHAI J`. Middle names are dropped the way Thai banks
 * drop them; a single word is printed whole. Whitespace is collapsed.
 *
 * A name that already starts with a title (`นางสาว วิไล ชื่นสุข`) keeps that title as its honorific when
 * `options.honorific` is not given; an explicit honorific replaces it, and `null` prints none.
 */
export function printedName(name: string, options?: { honorific?: PrintedHonorific | null }): string {
  const words = name.trim().split(WHITESPACE_PATTERN).filter((word) => word.length > 0);
  const leading_title = words.length > 1 && LEADING_TITLES.has((words[0] ?? '').toUpperCase()) ? words.shift() : undefined;
  const honorific = options?.honorific === undefined ? leading_title : options.honorific;
  const is_thai = THAI_SCRIPT_PATTERN.test(name);
  const first_name = words[0] ?? '';
  const surname = words.length > 1 ? words[words.length - 1] ?? '' : '';
  const parts = [honorific ?? '', first_name, surname === '' ? '' : firstGrapheme(surname)].filter((part) => part.length > 0);
  const printed = parts.join(' ');
  return is_thai ? printed : printed.toUpperCase();
}
