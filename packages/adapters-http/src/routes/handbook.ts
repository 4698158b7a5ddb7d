import { isEmail } from 'class-validator';
import type { Request } from 'express';
import { DomainError, type Clock, type HandbookLeadStore } from '@ets/domain';
import type { RouteModule } from '../route-table.js';
import { escapeHtml, htmlPage, sendPage } from './docs.js';

export interface HandbookDeps {
  leads: HandbookLeadStore;
  clock: Clock;
  /** Where the handbook is downloaded from (the composition root passes `/documentation`). */
  downloadUrl: string;
}

export const INVALID_EMAIL_MESSAGE = 'A valid email address is required.';
export const MAX_EMAIL_LENGTH = 320;

/**
 * A sensible address: a string of at most 320 characters (checked first, before any pattern work),
 * no whitespace, exactly one `@`, and what class-validator's `isEmail` accepts: a local part of at
 * most 64 characters and a domain name with a dot and a top-level label.
 */
export function isValidLeadEmail(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    value.length <= MAX_EMAIL_LENGTH &&
    !/\s/.test(value) &&
    value.indexOf('@') === value.lastIndexOf('@') &&
    isEmail(value)
  );
}

/**
 * Handbook download leads (spec 1.11, 4.1): the email address is stored (once per address,
 * ignoring case) before the download location is given. The address is never logged.
 */
export const handbookRoutes = (deps: HandbookDeps): RouteModule => {
  const capture = async (email: unknown): Promise<void> => {
    if (!isValidLeadEmail(email)) throw new DomainError('invalid', INVALID_EMAIL_MESSAGE);
    await deps.leads.add(email, deps.clock.now());
  };
  return (t) => {
    t.post('/handbook/download-leads', { auth: 'none', limiter: 'public' }, async (req, res) => {
      await capture(fieldOf(req.body, 'email'));
      res.status(201).json({ downloadUrl: deps.downloadUrl });
    });

    // The browser-form variant: same capture, then a redirect to the download. Public, as the
    // route table of spec 4.1 says (auth: none): a browser submitting a form sends no bearer key.
    // A browser (it asks for text/html) that comes without an address, or with a bad one, gets the
    // form, which submits to this same route; API clients keep the JSON answers.
    t.get('/handbook/download-leads', { auth: 'none', limiter: 'public', query: ['email'] }, async (req: Request, res) => {
      const browser = /\btext\/html\b/i.test(req.get('accept') ?? '');
      if (browser && !isValidLeadEmail(req.query.email)) {
        const attempted = req.query.email !== undefined;
        sendPage(res, leadForm(attempted ? INVALID_EMAIL_MESSAGE : undefined, typeof req.query.email === 'string' ? req.query.email : ''), attempted ? 400 : 200);
        return;
      }
      await capture(req.query.email);
      res.redirect(302, deps.downloadUrl);
    });
  };
};

const fieldOf = (body: unknown, name: string): unknown =>
  body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>)[name] : undefined;

/** A plain HTML form (no script) that submits the address to `GET /handbook/download-leads`. */
function leadForm(error: string | undefined, value: string): string {
  return htmlPage(
    'Execution Trust Service: download the handbook',
    `<h1>Download the operator handbook</h1>
<p>Leave your email address and you are taken to the handbook (the operator guide of this service).</p>
<form class="lead" method="get" action="/handbook/download-leads">
<label for="email">Email address</label>
<input id="email" name="email" type="email" required maxlength="${MAX_EMAIL_LENGTH}" autocomplete="email" value="${escapeHtml(value)}">
<button type="submit">Get the handbook</button>
</form>
${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}`,
  );
}
