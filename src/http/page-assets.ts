import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';

/**
 * What the service's HTML pages (the hosted checkout, the back-office console) share: files served under a name
 * that carries a hash of their content, so that a browser may keep them for a year and a new version is a new
 * name, the Thai font subsets they use, and the escaping of text into HTML.
 */
export interface StaticAsset {
  name: string;
  content_type: string;
  bytes: Buffer;
}

const require = createRequire(import.meta.url);

/** `bytes` named `<base>.<first 16 hex digits of their SHA-256>.<extension>`. */
export function hashedAsset(base: string, extension: string, content_type: string, bytes: Buffer): StaticAsset {
  const digest = crypto.createHash('sha256').update(bytes).digest('hex').slice(0, 16);
  return { name: `${base}.${digest}.${extension}`, content_type, bytes };
}

/**
 * A page's stylesheet with the Sarabun Thai subsets (regular and bold) it names by the placeholders
 * `__FONT_THAI_400__` and `__FONT_THAI_700__`, which become the fonts' hashed addresses under `assets_path`;
 * the fonts are returned to be served beside it.
 */
export function stylesheetWithThaiFonts(base: string, css_file: string, assets_path: string): { stylesheet: StaticAsset; fonts: StaticAsset[] } {
  const fonts = {
    __FONT_THAI_400__: hashedAsset('sarabun-thai-400', 'woff2', 'font/woff2', fs.readFileSync(require.resolve('@fontsource/sarabun/files/sarabun-thai-400-normal.woff2'))),
    __FONT_THAI_700__: hashedAsset('sarabun-thai-700', 'woff2', 'font/woff2', fs.readFileSync(require.resolve('@fontsource/sarabun/files/sarabun-thai-700-normal.woff2'))),
  };
  let css = fs.readFileSync(css_file, 'utf8');
  for (const [placeholder, font] of Object.entries(fonts)) css = css.replace(placeholder, `${assets_path}/${font.name}`);
  return { stylesheet: hashedAsset(base, 'css', 'text/css; charset=utf-8', Buffer.from(css, 'utf8')), fonts: Object.values(fonts) };
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text as HTML text or a quoted attribute value: every character that could start markup is escaped. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => HTML_ESCAPES[character] ?? character);
}
