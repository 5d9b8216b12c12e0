import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { escapeHtml, hashedAsset, stylesheetWithThaiFonts, type StaticAsset } from '../http/page-assets.ts';
import { SLIP_CONTENT_TYPES } from '../slip-capability/capability.ts';
import { checkoutTexts, type CheckoutLanguage, type CheckoutTextKey } from './texts.ts';

/**
 * The checkout page's HTML and its static files. The HTML is a shell: the same for every order, with
 * the words of one language and no order data, so that it may be served without the session (the
 * SameSite=Strict cookie is not sent on the navigation that follows a link from another site) and
 * reveals nothing. The script then reads the order with the cookie. The script, the stylesheet and the
 * font subsets are served under names that carry a hash of their content, so a browser may keep them for
 * a year and a new version is a new name; none of them carries anything about an order.
 */

export interface CheckoutAssets {
  script: StaticAsset;
  stylesheet: StaticAsset;
  icon: StaticAsset;
  byName: Map<string, StaticAsset>;
}

const ASSET_DIRECTORY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'assets');
let loaded: CheckoutAssets | null = null;

/** Reads the page's files once per process and names each by its content. */
export function checkoutAssets(): CheckoutAssets {
  if (loaded) return loaded;
  const { stylesheet, fonts } = stylesheetWithThaiFonts('checkout', path.join(ASSET_DIRECTORY, 'checkout.css'), '/checkout/assets');
  const script = hashedAsset('checkout', 'js', 'text/javascript; charset=utf-8', fs.readFileSync(path.join(ASSET_DIRECTORY, 'checkout.js')));
  // An icon of its own, so that the browser does not ask the brand's host for a /favicon.ico.
  const icon = hashedAsset('icon', 'svg', 'image/svg+xml', fs.readFileSync(path.join(ASSET_DIRECTORY, 'icon.svg')));
  const byName = new Map<string, StaticAsset>();
  for (const asset of [stylesheet, script, icon, ...fonts]) byName.set(asset.name, asset);
  loaded = { script, stylesheet, icon, byName };
  return loaded;
}

/** JSON inside a <script type="application/json"> block: `<` escaped so that no text can close the block. */
function inertJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/** The file input's `accept`: any image (so that a phone offers its camera too) and the capability's image types. */
const ACCEPT = ['image/*', ...SLIP_CONTENT_TYPES.filter((type) => type.startsWith('image/'))].join(',');

function head(language: CheckoutLanguage, assets: CheckoutAssets, withScript: boolean): string {
  const t = checkoutTexts(language);
  return `<!doctype html>
<html lang="${language}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(t.page_title)}</title>
<link rel="icon" href="/checkout/assets/${assets.icon.name}" type="image/svg+xml">
<link rel="stylesheet" href="/checkout/assets/${assets.stylesheet.name}">
${withScript ? `<script src="/checkout/assets/${assets.script.name}" defer></script>\n` : ''}</head>`;
}

function banner(language: CheckoutLanguage, switchable: boolean): string {
  const t = checkoutTexts(language);
  const other = language === 'th' ? 'en' : 'th';
  const nav = switchable
    ? `<nav aria-label="${escapeHtml(t.language_nav)}"><a href="?lang=${other}" lang="${other}" hreflang="${other}">${escapeHtml(t.other_language)}</a></nav>`
    : '';
  return `<header class="top">
<p class="site">${escapeHtml(t.page_title)}</p>
${nav}
<p class="sandbox-badge" id="sandbox-badge" hidden>${escapeHtml(t.sandbox_badge)}</p>
</header>`;
}

/**
 * The payer's cancel: a button, then a confirmation that says what canceling means, since a payer who
 * already transferred must upload the slip instead.
 */
function cancelSection(language: CheckoutLanguage): string {
  const t = checkoutTexts(language);
  const e = (key: CheckoutTextKey) => escapeHtml(t[key]);
  return `<section id="cancel" aria-labelledby="cancel-heading" hidden>
<h2 id="cancel-heading">${e('cancel_heading')}</h2>
<p>${e('cancel_text')}</p>
<button type="button" id="cancel-button" class="secondary">${e('cancel_button')}</button>
<div id="cancel-confirm" hidden>
<p id="cancel-confirm-text">${e('cancel_confirm_text')}</p>
<button type="button" id="cancel-confirm-button" class="danger" aria-describedby="cancel-confirm-text">${e('cancel_confirm_button')}</button>
<button type="button" id="cancel-keep-button" class="secondary">${e('cancel_keep_button')}</button>
</div>
<p id="cancel-progress" class="progress" aria-live="polite"></p>
<p id="cancel-error" class="error" role="alert" hidden></p>
</section>`;
}

/** The page at the order's checkout address: a shell the script fills from GET …/status. */
export function renderCheckoutShell(language: CheckoutLanguage, assets: CheckoutAssets): string {
  const t = checkoutTexts(language);
  const e = (key: CheckoutTextKey) => escapeHtml(t[key]);
  return `${head(language, assets, true)}
<body>
<a class="skip-link" href="#main">${e('skip_link')}</a>
${banner(language, true)}
<main id="main" tabindex="-1">
<h1><span>${e('amount_label')}</span> <span id="amount" class="amount"></span></h1>
<p id="status" class="status" role="status" aria-live="polite" aria-atomic="true" data-tone="info">${e('loading')}</p>
<p id="status-detail" class="status-detail" hidden></p>
<p id="network-error" class="notice" role="alert" hidden></p>
<p id="announcer" class="visually-hidden" aria-live="polite"></p>
<noscript><p class="notice">${e('noscript')}</p></noscript>

<section id="waiting" aria-labelledby="waiting-heading" hidden>
<h2 id="waiting-heading">${e('waiting_heading')}</h2>
<p>${e('waiting_text')}</p>
</section>

<section id="pay" aria-labelledby="pay-heading" hidden>
<h2 id="pay-heading">${e('pay_heading')}</h2>
<p id="multi-note" hidden></p>
<p class="countdown"><span id="countdown-label">${e('countdown_label')}</span> <span id="countdown" role="timer" aria-labelledby="countdown-label">--:--</span> <span id="deadline"></span></p>
<ol id="legs" class="legs"></ol>
</section>

<section id="sender" aria-labelledby="sender-heading" hidden>
<h2 id="sender-heading">${e('sender_heading')}</h2>
<dl id="sender-facts" class="facts"></dl>
<p class="hint">${e('sender_reminder')}</p>
</section>

<section id="upload" aria-labelledby="upload-heading" hidden>
<h2 id="upload-heading">${e('upload_heading')}</h2>
<form id="upload-form" novalidate>
<label for="slip-file">${e('upload_label')}</label>
<p id="slip-hint" class="hint">${e('upload_hint')}</p>
<input type="file" id="slip-file" name="file" accept="${ACCEPT}" aria-describedby="slip-hint uploads-left">
<p id="uploads-left" class="hint"></p>
<button type="submit" id="upload-button">${e('upload_button')}</button>
</form>
<p id="upload-progress" class="progress" aria-live="polite"></p>
<p id="upload-error" class="error" role="alert" hidden></p>
</section>

<section id="sandbox" aria-labelledby="sandbox-heading" hidden>
<h2 id="sandbox-heading">${e('sandbox_heading')}</h2>
<p>${e('sandbox_text')}</p>
<button type="button" id="simulate-button" class="secondary">${e('sandbox_button')}</button>
</section>

${cancelSection(language)}

<section id="done" aria-labelledby="done-heading" hidden>
<h2 id="done-heading">${e('done_heading')}</h2>
<p id="close-text" hidden>${e('close_page')}</p>
<a id="return-link" class="button-link" href="#main" rel="noreferrer" hidden>${e('return_link')}</a>
</section>

<p id="reference" class="reference"></p>
</main>
<script type="application/json" id="checkout-texts">${inertJson(t)}</script>
</body>
</html>
`;
}

/** A page with one message and no script: an unknown or wrong link, or too many requests. */
export function renderMessagePage(language: CheckoutLanguage, assets: CheckoutAssets, message: string): string {
  return `${head(language, assets, false)}
<body>
${banner(language, false)}
<main id="main">
<h1>${escapeHtml(checkoutTexts(language).page_title)}</h1>
<p class="status" data-tone="error">${escapeHtml(message)}</p>
</main>
</body>
</html>
`;
}
