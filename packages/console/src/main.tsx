/**
 * The approvers' console: sign in with a USER key (traded at once for an HttpOnly session cookie;
 * the key is dropped), then the inbox of everything this person may decide, one item with what
 * exactly is asked, decisions signed in the page, records verified in the browser, and the
 * transparency log's health.
 */
import './console.css';
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { call, setCsrfToken, whenSignedOut } from './api';
import { href, useRoute } from './router';
import { SignIn } from './pages/sign-in';
import { Inbox } from './pages/inbox';
import { ItemPage } from './pages/item';
import { Records } from './pages/records';
import { RecordPage } from './pages/record';
import { LogHealth } from './pages/log-health';
import { Notice } from './ui';

export interface Session {
  callerId: string;
  expiresAt: string;
}

function App() {
  const route = useRoute();
  // undefined: not known yet (asking the service whether this browser has a session).
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [ended, setEnded] = useState(false);

  const signedIn = useCallback((s: { callerId: string; csrfToken: string; expiresAt: string }) => {
    setCsrfToken(s.csrfToken);
    setEnded(false);
    setSession({ callerId: s.callerId, expiresAt: s.expiresAt });
  }, []);

  useEffect(() => {
    whenSignedOut(() => {
      setCsrfToken(undefined);
      setSession((s) => {
        if (s) setEnded(true);
        return null;
      });
    });
    // A reload or a new tab: the cookie may still hold a session; its CSRF token comes with it.
    void call<{ callerId: string; csrfToken: string; expiresAt: string }>('GET', '/console/session').then(
      (a) => (a.status === 200 ? signedIn(a.body) : setSession(null)),
      () => setSession(null),
    );
  }, [signedIn]);

  const signOut = async () => {
    await call('DELETE', '/console/session');
    setCsrfToken(undefined);
    setSession(null);
    location.hash = href.inbox();
  };

  if (session === undefined) return <p class="boot">Loading the console…</p>;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Execution Trust Service · Approvers' console</span>
        {session ? (
          <nav aria-label="Console">
            <a href={href.inbox()} aria-current={route.page === 'inbox' || route.page === 'item' ? 'page' : undefined}>
              Inbox
            </a>
            <a href={href.records()} aria-current={route.page === 'records' || route.page === 'record' ? 'page' : undefined}>
              Records
            </a>
            <a href={href.log()} aria-current={route.page === 'log' ? 'page' : undefined}>
              Log health
            </a>
          </nav>
        ) : null}
        {session ? (
          <span class="who">
            Signed in as <strong data-testid="caller">{session.callerId}</strong>
            <button type="button" class="link" onClick={signOut}>
              Sign out
            </button>
          </span>
        ) : null}
      </header>
      <main id="main">
        {ended ? <Notice kind="info">Your session ended (30 minutes without activity, or signed out elsewhere). Sign in again.</Notice> : null}
        {!session ? (
          <SignIn onSignedIn={signedIn} />
        ) : route.page === 'item' ? (
          <ItemPage kind={route.kind} id={route.id} me={session.callerId} />
        ) : route.page === 'records' ? (
          <Records query={route.query} />
        ) : route.page === 'record' ? (
          <RecordPage id={route.id} />
        ) : route.page === 'log' ? (
          <LogHealth />
        ) : (
          <Inbox me={session.callerId} />
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
