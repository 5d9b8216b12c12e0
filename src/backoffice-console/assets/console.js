/* global document, window */
/*
 * The back-office console's one script (src/backoffice-console/). The pages work without it; it adds:
 *
 * - on the review queue, a notice when the queue changed (polling its state at most every 5 seconds, and not
 *   while the tab is hidden), with a link that reloads it;
 * - on a review case, the same notice when the case changed after the page was rendered, and who else has the
 *   case open (kept current by the same polling);
 * - on slip images, zoom and rotate buttons.
 *
 * It reads what it needs from data- attributes and writes only text and element properties (no HTML from
 * strings: the CSP requires Trusted Types for such sinks and allows none).
 */
'use strict';

var POLL_INTERVAL_MS = 5000;

function watchForChanges(element) {
  var url = element.getAttribute('data-poll-url');
  var known = element.getAttribute('data-poll-state');
  var notice = document.getElementById(element.getAttribute('data-poll-notice'));
  if (!url || !known || !notice) return;
  var stopped = false;
  function poll() {
    if (stopped) return;
    if (document.visibilityState === 'hidden') {
      window.setTimeout(poll, POLL_INTERVAL_MS);
      return;
    }
    fetch(url, { credentials: 'same-origin', headers: { accept: 'application/json' }, cache: 'no-store' })
      .then(function (response) {
        if (!response.ok) throw new Error('status ' + response.status);
        return response.json();
      })
      .then(function (body) {
        // A case's answer also says who else is on it: shown as text, kept current while nothing else changed.
        var presence = element.querySelector('[data-presence]');
        if (presence && body && typeof body.viewers === 'string') presence.textContent = body.viewers;
        if (body && typeof body.state === 'string' && body.state !== known) {
          notice.hidden = false;
          stopped = true;
          return;
        }
        window.setTimeout(poll, POLL_INTERVAL_MS);
      })
      .catch(function () {
        // A signed-out or unreachable console stops asking; the next click shows why.
        stopped = true;
      });
  }
  window.setTimeout(poll, POLL_INTERVAL_MS);
}

function slipViewer(figure) {
  var image = figure.querySelector('img');
  if (!image) return;
  var scale = 1;
  var rotation = 0;
  function apply() {
    // The width (not a scale transform) grows the frame's scroll area, so a zoomed slip can be scrolled.
    image.style.maxWidth = 'none';
    image.style.width = scale * 100 + '%';
    image.style.transform = 'rotate(' + rotation + 'deg)';
    figure.setAttribute('data-scale', String(scale));
    figure.setAttribute('data-rotation', String(rotation));
  }
  figure.querySelectorAll('button[data-slip-action]').forEach(function (button) {
    button.hidden = false;
    button.addEventListener('click', function () {
      var action = button.getAttribute('data-slip-action');
      if (action === 'zoom-in') scale = Math.min(4, scale + 0.5);
      if (action === 'zoom-out') scale = Math.max(0.5, scale - 0.5);
      if (action === 'rotate') rotation = (rotation + 90) % 360;
      if (action === 'reset') {
        scale = 1;
        rotation = 0;
      }
      apply();
    });
  });
}

function start() {
  document.querySelectorAll('[data-poll-url]').forEach(watchForChanges);
  document.querySelectorAll('figure.slip').forEach(slipViewer);
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();
