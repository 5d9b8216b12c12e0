/* global document, window, location, FormData, Blob, createImageBitmap, crypto, atob */
/*
 * The hosted checkout page's script (src/checkout/). No framework and no build step: the server sends
 * this file as it is. It renders the order from GET ./status, keeps the countdown on the server's clock,
 * follows the order with backoff, and uploads the slip to the order's upload address with the order's
 * capability, which it asks for only when it needs it and keeps in memory only.
 *
 * Every text comes from the page's catalogue (#checkout-texts) or from the order (review reasons): none is
 * written here. Nothing here writes HTML from text (Trusted Types are enforced), only text nodes.
 */
'use strict';

(function main() {
  var POLL_STEPS_MS = [3000, 5000, 10000, 30000];
  // The spec's client guidance for a slip that must be made smaller: short edge 1000 px or more, JPEG
  // quality 0.85 or more, in colour, never cropped. Canvases above about 16.7 megapixels fail on phones.
  var MIN_SHORT_EDGE_PX = 1000;
  var MIN_JPEG_QUALITY = 0.85;
  var FIRST_JPEG_QUALITY = 0.92;
  var MAX_CANVAS_PIXELS = 16777216;
  var UPLOAD_ATTEMPTS = 3;

  var texts = JSON.parse(byId('checkout-texts').textContent);
  var language = document.documentElement.lang === 'en' ? 'en' : 'th';
  // The page's own address is /checkout/{brand}/{deposit}: its requests are made below it, where the
  // session cookie is sent.
  var base = location.pathname.replace(/\/+$/, '');
  var clockFormat = new Intl.DateTimeFormat(language === 'th' ? 'th-TH' : 'en-GB', { timeZone: 'Asia/Bangkok', hour: '2-digit', minute: '2-digit' });
  var dateTimeFormat = new Intl.DateTimeFormat(language === 'th' ? 'th-TH' : 'en-GB', {
    timeZone: 'Asia/Bangkok',
    day: 'numeric',
    month: 'short',
    hour: '2-digit',
    minute: '2-digit',
  });

  var page = {
    order: null,
    offsetMs: 0,
    pollIndex: 0,
    pollTimer: null,
    busy: false,
    stopped: false,
    // A slip was accepted (202) and its outcome is not known yet: the upload stays disabled meanwhile.
    awaitingOutcome: false,
    // What the order showed before that slip: its receipts and its paid legs.
    uploadsBefore: 0,
    completeBefore: 0,
    note: null,
    prepared: null,
    legsKey: '',
    announced: {},
    expiryPolled: false,
  };

  function byId(id) {
    return document.getElementById(id);
  }

  function text(key, values) {
    var result = texts[key] || key;
    if (values) {
      Object.keys(values).forEach(function (name) {
        result = result.split('{' + name + '}').join(String(values[name]));
      });
    }
    return result;
  }

  function setText(id, value) {
    byId(id).textContent = value;
  }

  function show(id, visible) {
    byId(id).hidden = !visible;
  }

  /** Satang as baht with two decimals, by integer arithmetic (money is never a float here either). */
  function money(minor) {
    var baht = String(Math.trunc(minor / 100)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
    return text('money', { amount: baht + '.' + String(minor % 100).padStart(2, '0') });
  }

  function pad(number) {
    return String(number).padStart(2, '0');
  }

  /** The service's clock as the phone best knows it: the phone's own clock corrected by the last answer. */
  function serverNow() {
    return Date.now() + page.offsetMs;
  }

  function newKey() {
    if (window.crypto && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (byte) {
      return byte.toString(16).padStart(2, '0');
    }).join('');
  }

  function announce(message) {
    var node = byId('announcer');
    node.textContent = '';
    // A change of text after a moment is what screen readers announce reliably.
    setTimeout(function () {
      node.textContent = message;
    }, 50);
  }

  function setStatus(message, tone, detail) {
    var node = byId('status');
    if (node.textContent !== message) node.textContent = message;
    node.setAttribute('data-tone', tone);
    setText('status-detail', detail || '');
    show('status-detail', Boolean(detail));
  }

  function uploadError(message) {
    setText('upload-error', message || '');
    show('upload-error', Boolean(message));
  }

  function uploadProgress(message) {
    setText('upload-progress', message || '');
  }

  // ---- reading the order -------------------------------------------------------------------------

  function requestJson(method, path, body, key) {
    var headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (key) headers['Idempotency-Key'] = key;
    var sentAt = Date.now();
    return fetch(base + path, {
      method: method,
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
      redirect: 'error',
    }).then(function (response) {
      return response.text().then(function (raw) {
        var parsed = null;
        try {
          parsed = raw ? JSON.parse(raw) : null;
        } catch {
          parsed = null;
        }
        return { status: response.status, body: parsed, headers: response.headers, sentAt: sentAt, receivedAt: Date.now() };
      });
    });
  }

  function errorCode(answer) {
    return answer && answer.body && answer.body.error ? answer.body.error.code : null;
  }

  function loadOrder() {
    return requestJson('GET', '/status').then(function (answer) {
      if (answer.status === 404) {
        linkInvalid();
        return null;
      }
      if (answer.status !== 200 || !answer.body) throw new Error('status ' + answer.status);
      // Half the round trip is the best guess of when the server read its clock.
      page.offsetMs = Date.parse(answer.body.server_time) - Math.round((answer.sentAt + answer.receivedAt) / 2);
      return answer.body;
    });
  }

  function following(order) {
    if (page.awaitingOutcome || order.slips.processing) return true;
    return order.status === 'awaiting_liquidity' || order.status === 'awaiting_payment' || order.status === 'slip_processing';
  }

  function schedulePoll(delayMs, restart) {
    if (page.stopped) return;
    clearTimeout(page.pollTimer);
    if (restart) page.pollIndex = 0;
    var delay = delayMs !== undefined ? delayMs : POLL_STEPS_MS[Math.min(page.pollIndex, POLL_STEPS_MS.length - 1)];
    page.pollTimer = setTimeout(poll, delay);
  }

  function poll() {
    return loadOrder()
      .then(function (order) {
        if (!order) return;
        var previous = page.order;
        var changed = !previous || previous.version !== order.version || previous.status !== order.status || previous.slips.processing !== order.slips.processing;
        page.pollIndex = changed ? 0 : page.pollIndex + 1;
        show('network-error', false);
        render(order);
        if (following(order)) schedulePoll();
      })
      .catch(function () {
        page.pollIndex += 1;
        setText('network-error', text('network_error'));
        show('network-error', true);
        schedulePoll();
      });
  }

  function linkInvalid() {
    page.stopped = true;
    clearTimeout(page.pollTimer);
    setStatus(text('link_invalid'), 'error');
    ['waiting', 'pay', 'sender', 'upload', 'sandbox', 'cancel', 'done'].forEach(function (id) {
      show(id, false);
    });
  }

  // ---- rendering ---------------------------------------------------------------------------------

  function completeLegs(order) {
    return order.legs.filter(function (leg) {
      return leg.leg_status === 'complete';
    }).length;
  }

  function windowOpen(order) {
    return Boolean(order.late_slip_accepted_until) && Date.parse(order.late_slip_accepted_until) > serverNow();
  }

  function render(order) {
    page.order = order;
    setText('amount', money(order.amount_minor));
    show('sandbox-badge', !order.livemode);
    setText('reference', text('order_reference', { id: order.deposit_id }));

    // The slip this page sent is in the order's receipts and was processed: if the order waits for
    // payment again, either a leg of a multi-leg order was paid or the image could not be read (its legs
    // say which). Any other status speaks for itself.
    if (page.awaitingOutcome && order.slips.uploaded > page.uploadsBefore && !order.slips.processing && order.status !== 'slip_processing') {
      page.awaitingOutcome = false;
      if (order.status === 'awaiting_payment') {
        var done = completeLegs(order);
        page.note = done > page.completeBefore ? text('leg_paid', { done: done }) : text('slip_unreadable');
      }
    }
    if (order.status !== 'awaiting_payment') page.note = null;

    var checking = order.slips.processing || order.status === 'slip_processing' || page.awaitingOutcome;
    var sections = { waiting: false, pay: false, sender: false, upload: false, sandbox: false, cancel: false, done: false };
    var detail = '';
    switch (order.status) {
      case 'awaiting_liquidity':
        setStatus(text('status_awaiting_liquidity'), 'info');
        sections.waiting = true;
        sections.sender = true;
        break;
      case 'awaiting_payment':
        if (checking) setStatus(text('status_checking'), 'info');
        else setStatus(page.note || text('status_awaiting_payment'), page.note === text('slip_unreadable') ? 'warn' : 'info');
        sections.pay = true;
        sections.sender = true;
        sections.upload = true;
        sections.sandbox = !order.livemode;
        sections.cancel = order.can_cancel;
        break;
      case 'slip_processing':
        setStatus(text('status_checking'), 'info');
        sections.upload = true;
        break;
      case 'settled':
        if (order.settlement && order.settlement.partial) {
          setStatus(text('status_settled_partial', { received: money(order.settlement.amount_received_minor), ordered: money(order.amount_minor) }), 'ok');
        } else {
          setStatus(text('status_settled'), 'ok');
        }
        sections.done = true;
        break;
      case 'under_review':
        if (order.review && order.review.reasons.length > 0) detail = displayText(order.review.reasons[0]);
        setStatus(text('status_under_review'), 'warn', detail);
        sections.done = true;
        break;
      case 'rejected':
        setStatus(text('status_rejected'), 'error', order.rejection ? displayText(order.rejection) : '');
        sections.done = true;
        break;
      case 'expired':
      case 'canceled':
        if (checking) {
          setStatus(text('status_checking'), 'info');
        } else {
          if (order.can_upload && windowOpen(order)) detail = text('late_upload_hint', { time: dateTimeFormat.format(new Date(order.late_slip_accepted_until)) });
          setStatus(text(order.status === 'expired' ? 'status_expired' : 'status_canceled'), 'error', detail);
        }
        sections.upload = order.can_upload || checking;
        sections.done = !checking;
        break;
      case 'reversed':
        setStatus(text('status_reversed'), 'error');
        sections.done = true;
        break;
      default:
        // The status is a closed enum today; a value added later still gets a neutral page.
        setStatus(text('status_checking'), 'info');
        break;
    }

    Object.keys(sections).forEach(function (id) {
      show(id, sections[id]);
    });
    if (sections.pay) renderPayment(order);
    if (sections.sender) renderSender(order);
    renderUpload(order, checking);
    renderSandbox(order);
    renderCancel(order);
    renderDone(order);
    tick();
  }

  /** The order's own display text of a reason or rejection, in the page's language. */
  function displayText(item) {
    return language === 'en' ? item.display_en : item.display_th;
  }

  function bankName(party) {
    return language === 'en' ? party.bank_name_en : party.bank_name_th;
  }

  function fact(list, label, value) {
    var row = document.createElement('div');
    var term = document.createElement('dt');
    var description = document.createElement('dd');
    term.textContent = label;
    description.textContent = value;
    row.appendChild(term);
    row.appendChild(description);
    list.appendChild(row);
  }

  function renderPayment(order) {
    var count = order.legs.length;
    setText('pay-heading', count > 1 ? text('pay_heading_multi', { count: count }) : text('pay_heading'));
    setText('multi-note', count > 1 ? text('multi_note', { count: count }) : '');
    show('multi-note', count > 1);
    setText('deadline', text('deadline', { time: clockFormat.format(new Date(order.expires_at)) }));
    // The list is rebuilt only when a leg changes, so that the QR images do not flicker on every poll.
    var key = JSON.stringify(
      order.legs.map(function (leg) {
        return [leg.leg_ref, leg.leg_status, leg.qr_image_url];
      }),
    );
    if (key === page.legsKey) return;
    page.legsKey = key;
    var list = byId('legs');
    while (list.firstChild) list.removeChild(list.firstChild);
    order.legs.forEach(function (leg) {
      var item = document.createElement('li');
      item.className = 'leg';
      item.setAttribute('data-leg-ref', leg.leg_ref);
      item.setAttribute('data-leg-status', leg.leg_status);
      var heading = document.createElement('h3');
      heading.textContent = count > 1 ? text('leg_heading', { n: leg.sequence, count: count, amount: money(leg.amount_minor) }) : text('leg_heading_single', { amount: money(leg.amount_minor) });
      item.appendChild(heading);
      if (leg.leg_status === 'complete') {
        var badge = document.createElement('p');
        badge.className = 'paid';
        badge.textContent = text('leg_paid_badge');
        item.appendChild(badge);
      } else if (leg.qr_image_url) {
        var image = document.createElement('img');
        image.className = 'qr';
        image.width = 240;
        image.height = 240;
        image.alt = text('qr_alt', { amount: money(leg.amount_minor), bank: bankName(leg.receiver), account: leg.receiver.account_number_masked });
        image.referrerPolicy = 'no-referrer';
        image.src = leg.qr_image_url;
        item.appendChild(image);
        var hint = document.createElement('p');
        hint.className = 'hint';
        hint.textContent = text('qr_hint');
        item.appendChild(hint);
      }
      var facts = document.createElement('dl');
      facts.className = 'facts';
      fact(facts, text('receiver_bank'), bankName(leg.receiver));
      fact(facts, text('receiver_account'), leg.receiver.account_number_masked);
      fact(facts, text('receiver_name'), leg.receiver.account_name_masked);
      fact(facts, text('amount'), money(leg.amount_minor));
      item.appendChild(facts);
      list.appendChild(item);
    });
  }

  function renderSender(order) {
    var facts = byId('sender-facts');
    while (facts.firstChild) facts.removeChild(facts.firstChild);
    fact(facts, text('sender_bank'), bankName(order.sender));
    fact(facts, text('sender_account'), order.sender.account_number_masked);
    fact(facts, text('sender_name'), order.sender.account_name_th_masked);
  }

  function renderUpload(order, checking) {
    var enabled = order.can_upload && !page.busy && !page.awaitingOutcome && !checking;
    byId('slip-file').disabled = !enabled;
    byId('upload-button').disabled = !enabled;
    setText('uploads-left', order.can_upload ? text('uploads_left', { count: order.slips.uploads_left }) : '');
    // Progress is shown only while this page works; "checking" is said once, by the status region.
    if (!page.busy) uploadProgress('');
  }

  function renderSandbox(order) {
    byId('simulate-button').disabled = !order.can_simulate || page.busy || page.awaitingOutcome;
  }

  function renderCancel(order) {
    var enabled = order.can_cancel && !page.busy && !page.awaitingOutcome;
    byId('cancel-button').disabled = !enabled;
    byId('cancel-confirm-button').disabled = !enabled;
    if (!order.can_cancel) show('cancel-confirm', false);
  }

  function renderDone(order) {
    var link = byId('return-link');
    if (order.return_url) {
      link.href = order.return_url;
      show('return-link', true);
      show('close-text', false);
    } else {
      show('return-link', false);
      show('close-text', true);
    }
  }

  function tick() {
    var order = page.order;
    if (!order || order.status !== 'awaiting_payment') return;
    var left = Date.parse(order.expires_at) - serverNow();
    var node = byId('countdown');
    if (left <= 0) {
      node.textContent = text('countdown_over');
      // The deadline passed on the server's clock: ask how the order stands instead of waiting for the next poll.
      if (!page.expiryPolled) {
        page.expiryPolled = true;
        schedulePoll(1500, true);
      }
      return;
    }
    page.expiryPolled = false;
    var total = Math.ceil(left / 1000);
    var hours = Math.floor(total / 3600);
    var minutes = Math.floor((total % 3600) / 60);
    var seconds = total % 60;
    node.textContent = (hours > 0 ? hours + ':' + pad(minutes) : pad(minutes)) + ':' + pad(seconds);
    // The timer itself is silent (a screen reader reading every second is noise): two warnings instead.
    if (total <= 300 && total > 240 && !page.announced.five) {
      page.announced.five = true;
      announce(text('countdown_five_minutes'));
    }
    if (total <= 60 && total > 30 && !page.announced.one) {
      page.announced.one = true;
      announce(text('countdown_one_minute'));
    }
  }

  // ---- the slip ----------------------------------------------------------------------------------

  function setBusy(busy, message) {
    page.busy = busy;
    uploadProgress(message || '');
    if (page.order) {
      renderUpload(page.order, false);
      renderSandbox(page.order);
      renderCancel(page.order);
    }
  }

  function failure(code) {
    var error = new Error(code);
    error.code = code;
    return error;
  }

  function wait(ms) {
    return new Promise(function (resolve) {
      setTimeout(resolve, ms);
    });
  }

  /** The order's upload capability, asked for each time it is needed and kept in this function only. */
  function capability() {
    return requestJson('POST', '/slip-upload').then(function (answer) {
      if (answer.status === 200 && answer.body && answer.body.token) return answer.body;
      if (answer.status === 404) throw failure('link_invalid');
      if (errorCode(answer) === 'deposit_not_payable') throw failure('closed');
      throw failure('failed');
    });
  }

  function encodeJpeg(bitmap, width, height, quality) {
    var canvas = document.createElement('canvas');
    canvas.width = width;
    canvas.height = height;
    var context = canvas.getContext('2d', { alpha: false });
    // A transparent PNG would turn black in a JPEG: white behind it, as the slip's paper.
    context.fillStyle = '#ffffff';
    context.fillRect(0, 0, width, height);
    context.imageSmoothingEnabled = true;
    context.imageSmoothingQuality = 'high';
    context.drawImage(bitmap, 0, 0, width, height);
    return new Promise(function (resolve, reject) {
      canvas.toBlob(
        function (blob) {
          if (blob) resolve(blob);
          else reject(failure('too_large'));
        },
        'image/jpeg',
        quality,
      );
    });
  }

  /**
   * A JPEG of the whole image within `maxBytes`: first at full size (or the largest canvas a phone
   * allows) at quality 0.92, then at 0.85, then smaller in steps of 20 % while the short edge stays at
   * 1000 px or more. Never upscaled, never cropped, never greyscale.
   */
  function shrinkToJpeg(bitmap, maxBytes) {
    var shortEdge = Math.min(bitmap.width, bitmap.height);
    var floor = Math.min(shortEdge, MIN_SHORT_EDGE_PX);
    var scale = Math.min(1, Math.sqrt(MAX_CANVAS_PIXELS / (bitmap.width * bitmap.height)));
    if (shortEdge * scale < floor) scale = floor / shortEdge;
    var quality = FIRST_JPEG_QUALITY;
    function attempt(round) {
      var width = Math.max(1, Math.round(bitmap.width * scale));
      var height = Math.max(1, Math.round(bitmap.height * scale));
      return encodeJpeg(bitmap, width, height, quality).then(function (blob) {
        if (blob.size <= maxBytes) return blob;
        if (quality > MIN_JPEG_QUALITY) {
          quality = MIN_JPEG_QUALITY;
          return attempt(round + 1);
        }
        if (Math.min(width, height) <= floor || round > 12) throw failure('too_large');
        scale = Math.max(floor / shortEdge, scale * 0.8);
        return attempt(round + 1);
      });
    }
    return attempt(0);
  }

  var EXTENSIONS = { 'image/jpeg': 'jpg', 'image/png': 'png', 'image/webp': 'webp' };

  /**
   * The file to send: the original when it is an image type the capability takes and within its
   * `max_bytes` (the verification reads the original best), else a JPEG made by shrinkToJpeg. The
   * payer's own file name is never sent.
   */
  function prepareImage(file, upload) {
    var imageTypes = upload.content_types.filter(function (type) {
      return type.indexOf('image/') === 0;
    });
    var knownType = imageTypes.indexOf(file.type) !== -1;
    if ((knownType || file.type === '') && file.size <= upload.max_bytes) {
      return Promise.resolve({ blob: file, name: 'slip.' + (EXTENSIONS[file.type] || 'img') });
    }
    if (file.type !== '' && file.type.indexOf('image/') !== 0) return Promise.reject(failure('not_image'));
    return createImageBitmap(file, { imageOrientation: 'from-image' })
      .catch(function () {
        throw failure('not_image');
      })
      .then(function (bitmap) {
        return shrinkToJpeg(bitmap, upload.max_bytes).then(
          function (blob) {
            if (bitmap.close) bitmap.close();
            return { blob: blob, name: 'slip.jpg' };
          },
          function (error) {
            if (bitmap.close) bitmap.close();
            throw error;
          },
        );
      });
  }

  /** One POST of the slip to the order's upload address, exactly as the capability names it. */
  function send(upload, prepared) {
    var form = new FormData();
    form.append('file', prepared.blob, prepared.name);
    return fetch(upload.upload_url, {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + upload.token, 'Idempotency-Key': prepared.key },
      body: form,
      credentials: 'omit',
      cache: 'no-store',
      referrerPolicy: 'no-referrer',
      redirect: 'error',
    }).then(function (response) {
      return response.text().then(function (raw) {
        var parsed = null;
        try {
          parsed = raw ? JSON.parse(raw) : null;
        } catch {
          parsed = null;
        }
        return { status: response.status, body: parsed, headers: response.headers };
      });
    });
  }

  /**
   * Sends the prepared slip, retrying what the spec says is retryable with the same Idempotency-Key
   * (a lost answer, 503 slip_intake_unavailable, 409 idempotency_in_flight), and asking for a fresh
   * capability once if the one in hand expired.
   */
  function sendWithRetries(upload, prepared, attempt, renewed) {
    return send(upload, prepared).then(
      function (answer) {
        var code = errorCode(answer);
        var retryable = answer.status === 503 || code === 'idempotency_in_flight';
        if (retryable && attempt < UPLOAD_ATTEMPTS) {
          uploadProgress(text('upload_retrying'));
          return wait(1000 * attempt).then(function () {
            return sendWithRetries(upload, prepared, attempt + 1, renewed);
          });
        }
        if (code === 'slip_token_expired' && !renewed) {
          return capability().then(function (fresh) {
            return sendWithRetries(fresh, prepared, attempt, true);
          });
        }
        return answer;
      },
      function () {
        if (attempt >= UPLOAD_ATTEMPTS) throw failure('failed');
        uploadProgress(text('upload_retrying'));
        return wait(1000 * attempt).then(function () {
          return sendWithRetries(upload, prepared, attempt + 1, renewed);
        });
      },
    );
  }

  function uploadFailureText(answer) {
    var code = errorCode(answer);
    if (code === 'slip_limit_reached') return text('upload_limit');
    if (code === 'late_slip_window_closed' || code === 'deposit_not_payable') return text('upload_closed');
    if (code === 'unsupported_media_type') return text('upload_not_image');
    if (code === 'rate_limited') return text('upload_rate_limited', { seconds: Number(answer.headers.get('Retry-After')) || 60 });
    if (code === 'validation_error') {
      var fields = (answer.body.error.details && answer.body.error.details.fields) || [];
      var reasons = fields.map(function (field) {
        return field.reason;
      });
      if (reasons.indexOf('too_large') !== -1) return text('upload_too_large');
      if (reasons.indexOf('unsupported_type') !== -1 || reasons.indexOf('empty') !== -1) return text('upload_not_image');
    }
    return text('upload_failed');
  }

  function failureText(error) {
    switch (error && error.code) {
      case 'not_image':
        return text('upload_not_image');
      case 'too_large':
        return text('upload_too_large');
      case 'closed':
        return text('upload_closed');
      case 'link_invalid':
        return text('link_invalid');
      default:
        return text('upload_failed');
    }
  }

  /** Prepares and sends one slip (a file the payer chose, or the sandbox bank's slip). */
  function uploadSlip(file) {
    var uploadsBefore = page.order ? page.order.slips.uploaded : 0;
    var completeBefore = page.order ? completeLegs(page.order) : 0;
    uploadError('');
    setBusy(true, text('upload_preparing'));
    return capability()
      .then(function (upload) {
        // The same file sent again after a failure keeps its Idempotency-Key: one slip, one receipt.
        var ready = page.prepared && page.prepared.source === file ? Promise.resolve(page.prepared) : prepareImage(file, upload).then(function (made) {
          page.prepared = { source: file, blob: made.blob, name: made.name, key: newKey() };
          return page.prepared;
        });
        return ready.then(function (prepared) {
          setBusy(true, text('upload_sending'));
          return sendWithRetries(upload, prepared, 1, false);
        });
      })
      .then(function (answer) {
        if (answer.status === 202) {
          // 202 means only that the slip is stored: no success is shown, the upload stays disabled, and
          // the page follows the order until its outcome (spec, slip intake rule 9).
          page.awaitingOutcome = true;
          page.uploadsBefore = uploadsBefore;
          page.completeBefore = completeBefore;
          page.prepared = null;
          page.note = null;
          byId('slip-file').value = '';
          setBusy(false, '');
          if (page.order) render(page.order);
          schedulePoll(1000, true);
          return;
        }
        setBusy(false, '');
        uploadError(uploadFailureText(answer));
        schedulePoll(0, true);
      })
      .catch(function (error) {
        setBusy(false, '');
        if (error && error.code === 'link_invalid') {
          linkInvalid();
          return;
        }
        uploadError(failureText(error));
      });
  }

  function base64Blob(base64, type) {
    var binary = atob(base64);
    var bytes = new Uint8Array(binary.length);
    for (var index = 0; index < binary.length; index += 1) bytes[index] = binary.charCodeAt(index);
    return new Blob([bytes], { type: type });
  }

  /** Sandbox: the sandbox bank transfers for the current leg, and the page uploads the slip it returns. */
  function simulateTransfer() {
    var order = page.order;
    if (!order || page.busy) return;
    var leg = order.legs.filter(function (candidate) {
      return candidate.leg_status === 'pending';
    })[0];
    if (!leg) return;
    uploadError('');
    setBusy(true, text('sandbox_working'));
    var key = newKey();
    function attempt(round) {
      return requestJson('POST', '/sandbox-transfer', { leg_ref: leg.leg_ref }, key).catch(function () {
        if (round >= UPLOAD_ATTEMPTS) throw failure('failed');
        return wait(1000 * round).then(function () {
          return attempt(round + 1);
        });
      });
    }
    attempt(1)
      .then(function (answer) {
        if (answer.status !== 201 || !answer.body || !answer.body.slip) {
          setBusy(false, '');
          uploadError(text('sandbox_failed'));
          schedulePoll(0, true);
          return undefined;
        }
        setBusy(false, '');
        return uploadSlip(base64Blob(answer.body.slip.image_base64, answer.body.slip.media_type));
      })
      .catch(function () {
        setBusy(false, '');
        uploadError(text('sandbox_failed'));
      });
  }

  // ---- the payer's cancel ------------------------------------------------------------------------

  function cancelError(message) {
    setText('cancel-error', message || '');
    show('cancel-error', Boolean(message));
  }

  /** Asks for a confirmation first: a payer who already transferred must upload the slip instead. */
  function askCancel() {
    cancelError('');
    show('cancel-confirm', true);
    byId('cancel-confirm-button').focus();
  }

  function keepPaying() {
    show('cancel-confirm', false);
    byId('cancel-button').focus();
  }

  /** Cancels the order; a lost answer is retried with the same key, so the order is canceled once. */
  function cancelOrder() {
    if (page.busy || !page.order || !page.order.can_cancel) return;
    cancelError('');
    page.busy = true;
    renderCancel(page.order);
    setText('cancel-progress', text('cancel_working'));
    var key = newKey();
    function attempt(round) {
      return requestJson('POST', '/cancel', undefined, key).catch(function () {
        if (round >= UPLOAD_ATTEMPTS) throw failure('failed');
        return wait(1000 * round).then(function () {
          return attempt(round + 1);
        });
      });
    }
    attempt(1)
      .then(function (answer) {
        page.busy = false;
        setText('cancel-progress', '');
        show('cancel-confirm', false);
        if (answer.status === 200 && answer.body) {
          // The status region announces the canceled order.
          render(answer.body);
          return;
        }
        if (answer.status === 404) {
          linkInvalid();
          return;
        }
        cancelError(errorCode(answer) === 'deposit_not_cancelable' ? text('cancel_refused') : text('cancel_failed'));
        schedulePoll(0, true);
      })
      .catch(function () {
        page.busy = false;
        setText('cancel-progress', '');
        cancelError(text('cancel_failed'));
        if (page.order) renderCancel(page.order);
      });
  }

  // ---- start -------------------------------------------------------------------------------------

  byId('upload-form').addEventListener('submit', function (event) {
    event.preventDefault();
    if (page.busy) return;
    var input = byId('slip-file');
    var file = input.files && input.files[0];
    if (!file) {
      uploadError(text('upload_choose_first'));
      input.focus();
      return;
    }
    uploadSlip(file);
  });
  byId('slip-file').addEventListener('change', function () {
    page.prepared = null;
    uploadError('');
  });
  byId('simulate-button').addEventListener('click', simulateTransfer);
  byId('cancel-button').addEventListener('click', askCancel);
  byId('cancel-keep-button').addEventListener('click', keepPaying);
  byId('cancel-confirm-button').addEventListener('click', cancelOrder);
  document.addEventListener('visibilitychange', function () {
    if (!document.hidden && page.order && following(page.order)) schedulePoll(0, true);
  });
  setInterval(tick, 1000);
  poll();
})();
