/**
 * The two-column rows of every CLI help text (actions with their summaries, options with their descriptions): the left
 * column padded to its widest cell, two spaces before and between.
 */
export function helpRows(rows: readonly (readonly [string, string])[]): string[] {
  const width = Math.max(0, ...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`);
}
