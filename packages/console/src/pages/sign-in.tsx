import { useState } from 'preact/hooks';
import { call, errorOf } from '../api';
import { Notice, PageTitle } from '../ui';

/**
 * Sign-in: the USER key is sent once and dropped; the service answers with an HttpOnly session
 * cookie (which no script can read) and the CSRF token, kept in memory only. Nothing is written
 * to the browser's storage, and the field is emptied whatever the answer.
 */
export function SignIn({ onSignedIn }: { onSignedIn: (s: { callerId: string; csrfToken: string; expiresAt: string }) => void }) {
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const input = form.elements.namedItem('apiKey') as HTMLInputElement;
    const apiKey = input.value.trim();
    input.value = '';
    if (apiKey === '') return setError('Enter your API key.');
    setBusy(true);
    setError(undefined);
    try {
      const answer = await call<{ callerId: string; csrfToken: string; expiresAt: string }>('POST', '/console/session', { apiKey });
      if (answer.status === 201) return onSignedIn(answer.body);
      const err = errorOf(answer);
      setError(
        answer.status === 401
          ? 'That key is not known to this service.'
          : err.code === 'NON_HUMAN_CALLER_DENIED'
            ? 'Only a person’s key (holder type USER) can sign in to the console; this key belongs to a service, role or organization.'
            : err.message,
      );
    } catch (e) {
      setError(`The service could not be reached: ${(e as Error).message}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="sign-in">
      <PageTitle>Sign in</PageTitle>
      <p>
        Sign in with your own API key (a <code>USER</code> key, <code>pk_…</code>). It is sent once to this service, which answers with a
        session cookie that scripts cannot read; the key is not kept in this browser. The session ends after 30 minutes without activity.
      </p>
      <form onSubmit={submit} class="stack" autocomplete="off">
        <label for="apiKey">API key</label>
        <input id="apiKey" name="apiKey" type="password" autocomplete="off" spellcheck={false} required aria-describedby={error ? 'sign-in-error' : undefined} />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      {error ? (
        <div id="sign-in-error">
          <Notice kind="error">{error}</Notice>
        </div>
      ) : null}
    </section>
  );
}
