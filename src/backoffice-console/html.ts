import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { escapeHtml, hashedAsset, stylesheetWithThaiFonts, type StaticAsset } from '../http/page-assets.ts';
import { consoleTexts, fill, type ConsoleLanguage, type ConsoleTextKey, type ConsoleTexts } from './texts.ts';
import { CONSOLE_PATH, type ConsoleSession } from './sessions.ts';
import { CLAIM_READ_ROLES } from '../review/claims.ts';
import { DISPUTE_ROLES } from '../disputes/service.ts';

/**
 * The console's HTML frame and static files. Every page is rendered on the server with its data; every text
 * that comes from the database or a person (names, references, notes, reason details) goes through `escapeHtml`,
 * and attribute values are always quoted, so no stored text can become markup. The one script is an external
 * file (the CSP allows no inline script); the pages work without it, and it adds the queue's refresh notice and
 * the slip viewer's zoom and rotate.
 */

export { escapeHtml };

export interface ConsoleAssets {
  script: StaticAsset;
  stylesheet: StaticAsset;
  byName: Map<string, StaticAsset>;
}

const ASSET_DIRECTORY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'assets');
let loaded: ConsoleAssets | null = null;

/** Reads the console's files once per process and names each by its content, so that a browser may keep them. */
export function consoleAssets(): ConsoleAssets {
  if (loaded) return loaded;
  const { stylesheet, fonts } = stylesheetWithThaiFonts('console', path.join(ASSET_DIRECTORY, 'console.css'), `${CONSOLE_PATH}/assets`);
  const script = hashedAsset('console', 'js', 'text/javascript; charset=utf-8', fs.readFileSync(path.join(ASSET_DIRECTORY, 'console.js')));
  const byName = new Map<string, StaticAsset>();
  for (const asset of [stylesheet, script, ...fonts]) byName.set(asset.name, asset);
  loaded = { script, stylesheet, byName };
  return loaded;
}

/** A console address with its query (the page's language included), escaped for an attribute. */
export function href(pathname: string, query: Record<string, string | null | undefined>, language: ConsoleLanguage): string {
  const parameters = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== null && value !== undefined && value !== '') parameters.set(name, value);
  if (language === 'en') parameters.set('lang', 'en');
  const text = parameters.toString();
  return escapeHtml(text === '' ? pathname : `${pathname}?${text}`);
}

/** What every page's frame needs to know. */
export interface PageFrame {
  language: ConsoleLanguage;
  title: string;
  /** The page's own address and query, for the language switch. */
  pathname: string;
  query: Record<string, string>;
  session: ConsoleSession | null;
  /**
   * A console address the page moves on to at once (a meta refresh), for the page that ends an OpenID sign-in: a
   * navigation the console's own page starts is same-site, so the SameSite=Strict session cookie goes with it,
   * which a redirect at the end of the provider's cross-site chain would not carry.
   */
  refresh_to?: string;
}

/** The texts of a page, and a helper that escapes one of them with its placeholders filled. */
export function wordsOf(language: ConsoleLanguage): { t: ConsoleTexts; e: (key: ConsoleTextKey, values?: Record<string, string | number>) => string } {
  const t = consoleTexts(language);
  return { t, e: (key, values) => escapeHtml(values ? fill(t[key], values) : t[key]) };
}

export function roleName(language: ConsoleLanguage, role: ConsoleSession['role']): string {
  return consoleTexts(language)[`role_${role}`];
}

/**
 * The main menu: one entry per area of the console, in this order. An entry names the roles that may open its
 * pages; a session of another role does not see it (the pages refuse it with 403 anyway).
 */
const NAVIGATION: ReadonlyArray<{ path: string; text: ConsoleTextKey; roles: ReadonlyArray<ConsoleSession['role']> }> = [
  { path: `${CONSOLE_PATH}/reviews`, text: 'nav_reviews', roles: ['reviewer', 'operator', 'platform_admin'] },
  { path: `${CONSOLE_PATH}/claims`, text: 'claims_nav', roles: CLAIM_READ_ROLES },
  { path: `${CONSOLE_PATH}/disputes`, text: 'disputes_nav', roles: DISPUTE_ROLES },
  { path: `${CONSOLE_PATH}/merchants`, text: 'nav_merchants', roles: ['operator', 'platform_admin'] },
  { path: `${CONSOLE_PATH}/orders`, text: 'nav_orders', roles: ['reviewer', 'operator', 'platform_admin'] },
  { path: `${CONSOLE_PATH}/audit`, text: 'nav_audit', roles: ['operator', 'platform_admin'] },
  { path: `${CONSOLE_PATH}/sign-in-settings`, text: 'sign_in_settings_nav', roles: ['operator', 'platform_admin'] },
];

function navigation(frame: PageFrame): string {
  const { e } = wordsOf(frame.language);
  const role = frame.session?.role;
  return NAVIGATION.filter((entry) => role !== undefined && entry.roles.includes(role))
    .map((entry) => {
      const current = frame.pathname === entry.path || frame.pathname.startsWith(`${entry.path}/`);
      return `<a href="${href(entry.path, {}, frame.language)}"${current ? ' aria-current="page"' : ''}>${e(entry.text)}</a>`;
    })
    .join(' ');
}

function header(frame: PageFrame): string {
  const { e } = wordsOf(frame.language);
  const other: ConsoleLanguage = frame.language === 'th' ? 'en' : 'th';
  const switchQuery = { ...frame.query };
  delete switchQuery.lang;
  const session = frame.session;
  const staff = session
    ? `<nav aria-label="${e('main_nav')}">${navigation(frame)}</nav>
<p class="who">${e('signed_in_as', { name: session.staff_name, role: roleName(frame.language, session.role) })}</p>
<form method="post" action="${href(`${CONSOLE_PATH}/sign-out`, {}, frame.language)}" class="sign-out">
<input type="hidden" name="csrf_token" value="${escapeHtml(session.csrf_token)}">
<button type="submit" class="secondary">${e('sign_out')}</button>
</form>`
    : '';
  return `<header class="top">
<p class="site">${e('console_title')}</p>
${staff}
<nav aria-label="${e('language_nav')}" class="language"><a href="${href(frame.pathname, switchQuery, other)}" lang="${other}" hreflang="${other}">${e('other_language')}</a></nav>
</header>`;
}

/** A whole page: the frame around `main` (already HTML, built from escaped parts). */
export function renderPage(frame: PageFrame, main: string): string {
  const assets = consoleAssets();
  const { e } = wordsOf(frame.language);
  return `<!doctype html>
<html lang="${frame.language}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<meta name="referrer" content="no-referrer">
${frame.refresh_to ? `<meta http-equiv="refresh" content="0; url=${escapeHtml(frame.refresh_to)}">\n` : ''}<title>${escapeHtml(frame.title)} · ${e('console_title')}</title>
<link rel="stylesheet" href="${CONSOLE_PATH}/assets/${assets.stylesheet.name}">
<script src="${CONSOLE_PATH}/assets/${assets.script.name}" defer></script>
</head>
<body>
<a class="skip-link" href="#main">${e('skip_link')}</a>
${header(frame)}
<main id="main" tabindex="-1">
${main}
</main>
</body>
</html>
`;
}

/** A page with a heading and one message (sign-in needed, 403, 404, a refused request, a used link). */
export function renderMessage(frame: Omit<PageFrame, 'title'>, heading: ConsoleTextKey, message: string, link?: { href: string; text: ConsoleTextKey }): string {
  const { t, e } = wordsOf(frame.language);
  const back = link ? `<p><a href="${link.href}">${e(link.text)}</a></p>` : '';
  return renderPage({ ...frame, title: t[heading] }, `<h1>${e(heading)}</h1>\n<p class="message" role="alert">${escapeHtml(message)}</p>\n${back}`);
}
