/**
 * An independent reading of "does this JSON text name one key twice in one object?", for tests that judge
 * the service's scanner (src/http/json-duplicate-keys.ts): a regular expression cuts the text into strings
 * and punctuation, and a stack of key sets follows the objects. It is slower and simpler than the scanner,
 * which is what an oracle should be. The text must be valid JSON.
 */
export function hasDuplicateKeyByTokens(text: string): boolean {
  const stack: (Set<string> | null)[] = [];
  let previous = '';
  for (const [token] of text.matchAll(/"(?:[^"\\]|\\.)*"|[{}[\],:]/g)) {
    const keys = stack.at(-1);
    if (token === '{') stack.push(new Set());
    else if (token === '[') stack.push(null);
    else if (token === '}' || token === ']') stack.pop();
    else if (token.startsWith('"') && keys && (previous === '{' || previous === ',')) {
      const key = JSON.parse(token) as string;
      if (keys.has(key)) return true;
      keys.add(key);
    }
    previous = token;
  }
  return false;
}
