// Login: a local username/password form (tenant users type "tenant/username") and one button
// per identity provider (OIDC), which leaves for the provider and comes back logged in.
import { ApiError, describeError, get, post, withQuery } from '../api';
import { field, h, replace } from '../dom';
import type { RouteContext } from '../router';
import { announce, errorBox } from '../status';
import type { LoginResponse, OidcProvider } from '../types';

export interface LoginHooks {
  /** After a successful password login: load the session and go on to `next`. */
  loggedIn: (next: string) => Promise<void>;
}

/** Only paths inside the console are followed after login (never another site). */
export function safeNext(next: string | null): string {
  if (!next || !next.startsWith('/') || next.startsWith('//') || next.includes('\\')) return '/';
  if (next.startsWith('/login')) return '/';
  return next;
}

function loginMessage(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.status === 401)
      return err.detail ? `Sign-in failed: ${err.detail}` : 'Sign-in failed: wrong username or password.';
    if (err.status === 429) return describeError(err);
    if (err.status === 403) return `Sign-in refused: ${describeError(err)}`;
  }
  return `Sign-in failed: ${describeError(err)}`;
}

export function renderLogin(ctx: RouteContext, hooks: LoginHooks): void {
  const next = safeNext(ctx.query.get('next'));
  const errorSlot = h('div', { class: 'error-slot' });
  const username = h('input', { name: 'username', autocomplete: 'username', required: true,
                                autocapitalize: 'none', spellcheck: 'false' });
  const password = h('input', { name: 'password', type: 'password', autocomplete: 'current-password',
                                required: true });
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const form = h('form', { class: 'login-form', 'aria-labelledby': 'local-login-heading' },
    h('h2', { id: 'local-login-heading' }, 'With a username and password'),
    field('Username', username,
          'Tenant users: tenant/username, for example acme/alice. Platform users: the username alone.'),
    field('Password', password),
    submit);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void (async () => {
      replace(errorSlot);
      if (!username.value.trim() || !password.value) {
        replace(errorSlot, errorBox('Enter both your username and your password.'));
        (username.value.trim() ? password : username).focus();
        return;
      }
      submit.disabled = true;
      submit.textContent = 'Signing in…';
      form.setAttribute('aria-busy', 'true');
      try {
        await post<LoginResponse>('/v1/auth/login',
          { username: username.value.trim(), password: password.value, cookie: true },
          { quiet401: true });
        password.value = '';
        announce('Signed in.');
        await hooks.loggedIn(next);
      } catch (err) {
        replace(errorSlot, errorBox(loginMessage(err)));
        password.value = '';
        password.focus();
      } finally {
        submit.disabled = false;
        submit.textContent = 'Sign in';
        form.removeAttribute('aria-busy');
      }
    })();
  });

  const providers = h('div', { class: 'providers' }, h('p', { class: 'loading' }, 'Looking for identity providers…'));
  const notices: HTMLElement[] = [];
  // A login that came back refused (for a server that redirects with the reason).
  const refused = ctx.query.get('login_error') ?? ctx.query.get('error');
  if (refused) notices.push(errorBox(`Sign-in failed: ${refused}`));
  if (ctx.query.get('logged_out')) notices.push(h('p', { class: 'notice success' }, 'You are logged out.'));
  if (ctx.query.get('expired')) notices.push(h('p', { class: 'notice' }, 'Your session has ended. Sign in again.'));

  ctx.main.append(h('section', { class: 'login' },
    h('h1', null, 'Sign in to gpuplane'),
    notices, errorSlot, form, providers));

  void (async () => {
    try {
      const list = await get<{ items: OidcProvider[] }>('/v1/auth/oidc/providers', undefined, { signal: ctx.signal });
      if (list.items.length === 0) {
        providers.remove();
        return;
      }
      const returnTo = `/console${next === '/' ? '/' : next}`;
      replace(providers,
        h('h2', { id: 'sso-heading' }, 'With your organization’s account'),
        h('ul', { class: 'provider-list', 'aria-labelledby': 'sso-heading' },
          list.items.map((p) => h('li', null,
            h('a', { class: 'button', href: withQuery(p.login_url, { return_to: returnTo }),
                     'data-provider': p.name },
              `Sign in with ${p.display_name || p.name}`)))));
    } catch (err) {
      if (ctx.signal.aborted) return;
      replace(providers, h('p', { class: 'hint' },
        `Identity providers could not be listed (${describeError(err)}); password sign-in still works.`));
    }
  })();
}
