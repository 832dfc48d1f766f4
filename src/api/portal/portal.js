// The merchant portal: a page over this origin's merchant API, calling it with the key it was opened with (a portal
// link's, in the URL's fragment, or one the merchant types). The key lives in this tab's sessionStorage only; every
// text from the API is set as text, never as markup.
const KEY = 'hold-sweeper-portal-key';
const AT_AN_END = ['delivered', 'discarded', 'abandoned'];
const $ = (id) => document.getElementById(id);

/** An element with properties and children (strings become text nodes). */
function el(tag, props = {}, ...children) {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...children.filter((c) => c !== undefined && c !== null));
  return e;
}

function notice(text, error = false) {
  $('notice').textContent = text;
  $('notice').className = error ? 'error' : '';
}

class ApiError extends Error {}
/** The key was refused: the page has said so and shows the sign-in again. */
class SignedOut extends Error {}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: {
      authorization: `Bearer ${sessionStorage.getItem(KEY)}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (response.status === 401) {
    signOut('You are signed out: your link or key is no longer valid. Open a new link, or sign in with a key.');
    throw new SignedOut();
  }
  if (!response.ok) throw new ApiError(`${answer.error ?? response.status}: ${answer.message ?? ''}`);
  return { status: response.status, body: answer };
}

/** Runs an action of a button or form, saying what went wrong instead of failing silently. */
function action(run) {
  return async (event) => {
    event?.preventDefault();
    try {
      await run(event);
    } catch (err) {
      if (!(err instanceof SignedOut)) notice(err.message, true);
    }
  };
}

const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');

function signOut(message) {
  sessionStorage.removeItem(KEY);
  $('signed-in').hidden = true;
  $('sign-out').hidden = true;
  $('sign-in').hidden = false;
  $('who').textContent = '';
  notice(message ?? 'Signed out.');
}

async function signIn(key) {
  sessionStorage.setItem(KEY, key);
  const endpoint = await loadEndpoint();
  $('sign-in').hidden = true;
  $('signed-in').hidden = false;
  $('sign-out').hidden = false;
  $('who').textContent = `Signed in as ${endpoint.merchantId}`;
  notice('');
  await Promise.all([loadSecrets(), loadTypes(endpoint), loadDeliveries()]);
}

async function loadEndpoint() {
  const { body: e } = await api('GET', '/v1/endpoint');
  const statusText =
    e.status === 'active'
      ? 'sending'
      : `${e.status} since ${when(e.statusSince)}: ${e.statusReason ?? 'no reason given'}`;
  $('endpoint').replaceChildren(
    el('dt', {}, 'URL'),
    el('dd', {}, e.url),
    el('dt', {}, 'Pace'),
    el(
      'dd',
      {},
      `${e.ratePerSecond} per second, ${e.burst} at once (you may declare up to ${e.rateCeiling} and ${e.burstCeiling})`,
    ),
    el('dt', {}, 'Status'),
    el('dd', { className: `status-${e.status}` }, statusText),
  );
  $('url').value ||= e.url;
  $('rate').value = e.ratePerSecond;
  $('burst').value = e.burst;
  return e;
}

/** Follows a test send or a URL verification until a worker has sent it, then says what the endpoint answered. */
async function followCheck(answer) {
  let check = answer;
  while (!check.finishedAt) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    check = (await api('GET', `/v1/endpoint/checks/${encodeURIComponent(check.id)}`)).body;
  }
  const r = check.result ?? {};
  const said = r.refused
    ? `Not sent: ${r.refused}: ${r.message}`
    : `Your endpoint answered ${r.statusCode ?? r.errorClass} in ${r.durationMs} ms (${r.signatures} signature${r.signatures === 1 ? '' : 's'}); a webhook answered so: ${r.policyAction}.`;
  const applied =
    check.kind === 'verify' ? (check.applied ? ' The URL is your endpoint now.' : ' The URL was not applied.') : '';
  $('check-result').replaceChildren(
    el('p', {}, said + applied),
    ...(r.responseExcerpt ? [el('pre', {}, r.responseExcerpt)] : []),
  );
  return check;
}

async function loadSecrets() {
  const { body } = await api('GET', '/v1/endpoint/secrets');
  $('secrets').replaceChildren(
    ...body.items.map((s) =>
      el(
        'tr',
        {},
        el('td', {}, s.id),
        el('td', {}, when(s.createdAt)),
        el('td', {}, s.current ? 'until rotated' : when(s.expiresAt)),
        el(
          'td',
          {},
          s.current
            ? 'current'
            : el('button', {
                type: 'button',
                textContent: 'End now',
                ariaLabel: `End secret ${s.id} now`,
                onclick: action(async () => {
                  await api('POST', `/v1/endpoint/secrets/${encodeURIComponent(s.id)}/expire`, { inSeconds: 0 });
                  notice(`Secret ${s.id} no longer signs.`);
                  await loadSecrets();
                }),
              }),
        ),
      ),
    ),
  );
}

async function loadTypes(endpoint) {
  const { body } = await api('GET', '/v1/event-types');
  const chosen = new Set(endpoint.eventTypes ?? []);
  $('types').replaceChildren(
    ...body.items
      .filter((t) => t.subscribable)
      .map((t) =>
        el(
          'label',
          { title: t.description },
          el('input', { type: 'checkbox', name: 'type', value: t.type, checked: chosen.has(t.type) }),
          ` ${t.type}`,
        ),
      ),
  );
  for (const radio of document.querySelectorAll('input[name="types-mode"]'))
    radio.checked = radio.value === (endpoint.eventTypes === null ? 'all' : 'chosen');
  $('filter-type').replaceChildren(
    el('option', { value: '' }, 'any'),
    ...body.items.map((t) => el('option', { value: t.type }, t.type)),
  );
}

function attemptsRow(w) {
  return el(
    'tr',
    {},
    el(
      'td',
      { colSpan: 6, className: 'attempts' },
      w.attempts.length === 0
        ? 'No attempt yet.'
        : el(
            'table',
            {},
            el('caption', {}, `Attempts of ${w.webhookId}`),
            el(
              'thead',
              {},
              el('tr', {}, ...['#', 'Started', 'Answer', 'Took', 'Response'].map((h) => el('th', { scope: 'col' }, h))),
            ),
            el(
              'tbody',
              {},
              ...w.attempts.map((a) =>
                el(
                  'tr',
                  {},
                  el('td', {}, String(a.attempt)),
                  el('td', {}, when(a.startedAt)),
                  el('td', {}, String(a.statusCode ?? a.errorClass)),
                  el('td', {}, `${a.durationMs} ms`),
                  el('td', {}, el('pre', {}, a.responseExcerpt ?? '')),
                ),
              ),
            ),
          ),
    ),
  );
}

async function loadDeliveries() {
  const query = new URLSearchParams({ limit: '50' });
  const add = (name, value) => value && query.set(name, value);
  add('status', $('filter-status').value);
  add('eventType', $('filter-type').value);
  add('since', $('filter-since').value && new Date($('filter-since').value).toISOString());
  add('until', $('filter-until').value && new Date($('filter-until').value).toISOString());
  const { body } = await api('GET', `/v1/webhooks?${query}`);
  $('deliveries').replaceChildren(
    ...body.items.flatMap((w) => {
      const details = attemptsRow(w);
      details.hidden = true;
      const toggle = el('button', {
        type: 'button',
        textContent: 'Attempts',
        ariaExpanded: 'false',
        ariaLabel: `Attempts of ${w.webhookId}`,
        onclick: () => {
          details.hidden = !details.hidden;
          toggle.ariaExpanded = String(!details.hidden);
        },
      });
      const resend = AT_AN_END.includes(w.status)
        ? el('button', {
            type: 'button',
            textContent: 'Resend',
            ariaLabel: `Resend ${w.webhookId}`,
            onclick: action(async () => {
              const { body: asked } = await api('POST', `/v1/webhooks/${encodeURIComponent(w.webhookId)}/resend`);
              notice(
                `Resend of ${w.webhookId} asked for: it starts within ${asked.startsWithinSeconds} s (request ${asked.requestId}).`,
              );
            }),
          })
        : undefined;
      return [
        el(
          'tr',
          {},
          el('td', {}, when(w.createdAt)),
          el('td', {}, w.webhookId),
          el('td', {}, w.eventType),
          el(
            'td',
            { className: `status-${w.status}` },
            w.status + (w.quarantineReason ? ` (${w.quarantineReason})` : ''),
          ),
          el('td', {}, String(w.attemptCount)),
          el('td', {}, toggle, ' ', resend),
        ),
        details,
      ];
    }),
  );
}

document.addEventListener('DOMContentLoaded', () => {
  for (const status of ['pending', 'delivered', 'quarantined', 'discarded', 'abandoned', 'not_subscribed'])
    $('filter-status').append(el('option', { value: status }, status));

  $('key-form').addEventListener(
    'submit',
    action(() => signIn($('api-key').value.trim())),
  );
  $('sign-out').addEventListener('click', () => signOut());
  $('filter-form').addEventListener('submit', action(loadDeliveries));
  $('test-send').addEventListener(
    'click',
    action(async () => {
      $('check-result').textContent = 'Sending…';
      await followCheck((await api('POST', '/v1/endpoint/test')).body);
    }),
  );
  $('url-form').addEventListener(
    'submit',
    action(async () => {
      $('check-result').textContent = 'Verifying…';
      const check = await followCheck((await api('PUT', '/v1/endpoint/url', { url: $('url').value })).body);
      if (check.applied) await loadEndpoint();
    }),
  );
  $('rate-form').addEventListener(
    'submit',
    action(async () => {
      await api('PUT', '/v1/endpoint/rate', {
        ratePerSecond: Number($('rate').value),
        burst: Number($('burst').value),
      });
      await loadEndpoint();
      notice('Pace saved: it holds from the next request.');
    }),
  );
  $('types-form').addEventListener(
    'submit',
    action(async () => {
      const every = document.querySelector('input[name="types-mode"]:checked')?.value !== 'chosen';
      const types = [...document.querySelectorAll('input[name="type"]:checked')].map((i) => i.value);
      await api('PUT', '/v1/endpoint/event-types', { eventTypes: every ? null : types });
      notice(every ? 'Your endpoint takes every event type.' : `Your endpoint takes ${types.join(', ')}.`);
    }),
  );
  $('rotate').addEventListener(
    'click',
    action(async () => {
      const { body } = await api('POST', '/v1/endpoint/secrets', {});
      $('new-secret-value').value = body.secret;
      $('new-secret').hidden = false;
      $('new-secret-value').focus();
      notice(`New secret ${body.id} signs from now on.`);
      await loadSecrets();
    }),
  );

  // A portal link carries its key in the fragment: kept for this tab, then taken out of the address bar and history.
  const fromLink = () => {
    const linked = new URLSearchParams(location.hash.slice(1)).get('key');
    if (linked) history.replaceState(null, '', location.pathname);
    return linked;
  };
  window.addEventListener('hashchange', () => {
    const linked = fromLink();
    if (linked) action(() => signIn(linked))();
  });
  const key = fromLink() ?? sessionStorage.getItem(KEY);
  if (key) action(() => signIn(key))();
});
