import type { FieldProblem } from '../platform/errors.ts';
import { isStorableText } from './validation.ts';

/**
 * Finds object keys that appear twice in one object of a JSON text (issue 28, item 8).
 *
 * `JSON.parse` keeps the last of two equal keys, while other parsers keep the first or refuse the
 * text: a signed body with a duplicate key could then be read as one request by the merchant's
 * validator and as another by this service. Every JSON body is therefore scanned once, after it
 * parsed, and a duplicate at any depth is refused (docs/decisions/http-and-request-bodies.md, "Duplicate keys in JSON bodies").
 *
 * The scan is one linear pass over text that `JSON.parse` has already accepted, so it tracks only
 * what it needs (the keys of each open object and the position of each open container, for the
 * path) and never checks the grammar itself. Strings are skipped with `indexOf` rather than one
 * character at a time, so a body that is mostly one long string (a base64 slip of several
 * megabytes) costs a native search, and only keys are ever copied. Keys are compared after JSON
 * unescaping (`"a"` and `"\u0061"` are one key), as the parser compares them.
 */

/**
 * Containers nested deeper than this are refused rather than scanned. It is above the 32 levels that
 * the body walk of validation.ts accepts, so the scan never refuses a body that the walk would let
 * through; its only purpose is to keep the scanner's per-level state bounded however deep a body nests.
 */
export const MAX_SCAN_DEPTH = 64;

/** At most this many problems are named, as the body walk of validation.ts names at most 20. */
const MAX_PROBLEMS = 20;

/**
 * An object's keys are kept in an array up to this many (a linear search over a few short strings
 * is faster than creating and filling a Set, and most objects of a request have a handful of keys),
 * and in a Set beyond it, so that an object with a hundred thousand keys stays linear.
 */
const KEYS_IN_ARRAY = 16;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** The index of the quote that closes the string opened at `start`, or the text's length if none does. */
function closingQuote(text: string, start: number): number {
  let end = text.indexOf('"', start + 1);
  while (end !== -1) {
    // A quote preceded by an odd run of backslashes is escaped; an even run is escaped backslashes.
    let backslashes = 0;
    while (text.charCodeAt(end - 1 - backslashes) === BACKSLASH) backslashes += 1;
    if (backslashes % 2 === 0) return end;
    end = text.indexOf('"', end + 1);
  }
  return text.length;
}

class KeyScanner {
  /** One entry per open container: the keys seen so far in an object, `null` for an array. */
  private readonly keys: (string[] | Set<string> | null)[] = [];
  /** One entry per open container: the current member's key (object) or index (array), for paths. */
  private readonly labels: (string | number)[] = [];
  private expectingKey = false;
  readonly problems: FieldProblem[] = [];

  constructor(private readonly text: string) {}

  /** Scans the whole text, or up to the first problem that ends the scan (nesting) or the cap of problems. */
  run(): FieldProblem[] {
    const text = this.text;
    for (let index = 0; index < text.length && this.problems.length < MAX_PROBLEMS; index += 1) {
      switch (text.charCodeAt(index)) {
        case QUOTE:
          index = this.string(index);
          break;
        case OPEN_BRACE:
        case OPEN_BRACKET:
          if (!this.open(text.charCodeAt(index) === OPEN_BRACE)) return this.problems;
          break;
        case CLOSE_BRACE:
        case CLOSE_BRACKET:
          this.keys.pop();
          this.labels.pop();
          this.expectingKey = false;
          break;
        case COMMA:
          this.nextMember();
          break;
        default:
          // Whitespace, `:`, numbers and literals carry no key: the parser already checked them.
          break;
      }
    }
    return this.problems;
  }

  /** Skips the string that starts at `start`, recording it if it is a key; returns its closing quote. */
  private string(start: number): number {
    const end = closingQuote(this.text, start);
    if (!this.expectingKey) return end;
    this.expectingKey = false;
    const raw = this.text.slice(start + 1, end);
    // Only a key with an escape needs decoding; the text parsed, so the escape is well formed.
    const key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
    const depth = this.keys.length - 1;
    this.labels[depth] = key;
    if (this.isNewKey(depth, key)) return end;
    this.report(this.pathTo(depth + 1), 'duplicate_key');
    return end;
  }

  /** Records `key` in the object open at `depth`; false when that object already has it. */
  private isNewKey(depth: number, key: string): boolean {
    const seen = this.keys[depth] as string[] | Set<string>;
    if (seen instanceof Set) {
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    }
    if (seen.includes(key)) return false;
    seen.push(key);
    if (seen.length > KEYS_IN_ARRAY) this.keys[depth] = new Set(seen);
    return true;
  }

  /** Opens an object or an array; false (and a problem) when that would nest deeper than allowed. */
  private open(isObject: boolean): boolean {
    if (this.keys.length >= MAX_SCAN_DEPTH) {
      this.report(this.pathTo(this.keys.length), 'too_deeply_nested');
      return false;
    }
    this.keys.push(isObject ? [] : null);
    this.labels.push(0);
    this.expectingKey = isObject;
    return true;
  }

  /** A comma moves an array to its next index, and makes an object's next string a key. */
  private nextMember(): void {
    const depth = this.keys.length - 1;
    if (this.keys[depth] === null) this.labels[depth] = (this.labels[depth] as number) + 1;
    else this.expectingKey = true;
  }

  /**
   * The path of the member at `length` levels, spelled as the other validation errors spell paths
   * (`sender.bank_code`, `items.0.name`, `$` for the body itself). A key that is not storable text is
   * named `(key)`, as the body walk of validation.ts names it, so that no answer echoes such text.
   */
  private pathTo(length: number): string {
    const segments = this.labels.slice(0, length).map((label) => (typeof label === 'number' || isStorableText(label) ? String(label) : '(key)'));
    return segments.join('.') || '$';
  }

  private report(path: string, reason: string): void {
    if (this.problems.some((problem) => problem.path === path && problem.reason === reason)) return;
    this.problems.push({ path, reason });
  }
}

/**
 * The duplicate keys of a JSON text that `JSON.parse` accepted, as `validation_error` field problems
 * (`reason: 'duplicate_key'`), or a `too_deeply_nested` problem when containers nest deeper than
 * `MAX_SCAN_DEPTH`; empty when every object's keys are distinct.
 */
export function duplicateKeyProblems(text: string): FieldProblem[] {
  return new KeyScanner(text).run();
}
