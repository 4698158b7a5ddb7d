import { useRef, useState } from 'preact/hooks';
import { call, errorOf } from '../api';
import { canonicalText, refusalText, signWithKeyFile, type Payload } from '../signing';
import { errorText, Json, Notice, When } from '../ui';

export interface DecisionSpec {
  /** What is being decided, for the headings ("this policy change"). */
  what: string;
  /** Builds the payload to sign for a decision (fresh nonce and expiry each time). */
  prepare(action: 'approve' | 'reject', reason: string | undefined): Payload;
  /** Where the signed decision goes. */
  path(action: 'approve' | 'reject'): string;
  /** Whether a reason is needed to approve too (never; to reject, always). */
  approveReason?: boolean;
}

type Stage =
  | { step: 'choose' }
  | { step: 'review'; action: 'approve' | 'reject'; payload: Payload }
  | { step: 'sending'; action: 'approve' | 'reject' }
  | { step: 'refused'; message: string; detail: string };

/**
 * Approve or reject, signed in this page: choose, give the key file (a file or pasted PEM), see
 * exactly what will be signed, then sign and send. The key is read into this component only for
 * the signature and forgotten at once (and when the person cancels); it is never stored.
 */
export function Decision({ spec, onDecided }: { spec: DecisionSpec; onDecided: (action: 'approve' | 'reject', answer: unknown) => void }) {
  const [stage, setStage] = useState<Stage>({ step: 'choose' });
  const [problem, setProblem] = useState<string | undefined>();
  const pem = useRef<string | undefined>(undefined);
  const form = useRef<HTMLFormElement>(null);
  const review = useRef<HTMLDivElement>(null);

  const forgetKey = () => {
    pem.current = undefined;
    const f = form.current;
    if (f) {
      (f.elements.namedItem('keyFile') as HTMLInputElement).value = '';
      (f.elements.namedItem('keyPem') as HTMLTextAreaElement).value = '';
    }
  };

  const prepare = async (e: Event) => {
    e.preventDefault();
    setProblem(undefined);
    const f = e.currentTarget as HTMLFormElement;
    const action = (f.elements.namedItem('action') as RadioNodeList).value as 'approve' | 'reject' | '';
    const reason = (f.elements.namedItem('reason') as HTMLTextAreaElement).value.trim();
    const file = (f.elements.namedItem('keyFile') as HTMLInputElement).files?.[0];
    const pasted = (f.elements.namedItem('keyPem') as HTMLTextAreaElement).value.trim();
    if (action !== 'approve' && action !== 'reject') return setProblem('Choose approve or reject.');
    if (action === 'reject' && reason === '') return setProblem('A rejection needs a reason: it is recorded with the decision.');
    if (!file && pasted === '') return setProblem('Give your step-up key file (choose the file, or paste its PEM).');
    try {
      pem.current = file ? await file.text() : pasted;
      const payload = spec.prepare(action, reason === '' ? undefined : reason);
      setStage({ step: 'review', action, payload });
      setTimeout(() => review.current?.focus(), 0);
    } catch (err) {
      forgetKey();
      setProblem(errorText(err));
    }
  };

  const send = async (action: 'approve' | 'reject', payload: Payload) => {
    setStage({ step: 'sending', action });
    let signature: string;
    try {
      signature = await signWithKeyFile(pem.current ?? '', payload);
    } catch (err) {
      forgetKey();
      setStage({ step: 'refused', message: 'Not signed.', detail: errorText(err) });
      return;
    } finally {
      forgetKey();
    }
    try {
      const answer = await call('POST', spec.path(action), { payload, signature });
      if (answer.status >= 200 && answer.status < 300) {
        // The item page says so and reads the item again (no longer waiting, this form goes).
        onDecided(action, answer.body);
        setStage({ step: 'choose' });
      } else {
        const err = errorOf(answer);
        setStage({ step: 'refused', message: refusalText(err.code, answer.status), detail: `${answer.status}${err.code ? ` ${err.code}` : ''}: ${err.message}` });
      }
    } catch (err) {
      setStage({ step: 'refused', message: 'The service could not be reached.', detail: errorText(err) });
    }
  };

  const cancel = () => {
    forgetKey();
    setStage({ step: 'choose' });
  };

  return (
    <section class="decision" aria-labelledby="decide-heading">
      <h2 id="decide-heading">Decide</h2>
      {stage.step === 'choose' || stage.step === 'refused' ? (
        <form ref={form} onSubmit={prepare} class="stack" autocomplete="off">
          <fieldset>
            <legend>Your decision on {spec.what}</legend>
            <label class="inline">
              <input type="radio" name="action" value="approve" /> Approve
            </label>
            <label class="inline">
              <input type="radio" name="action" value="reject" /> Reject
            </label>
          </fieldset>
          <label for="reason">Reason (required to reject; recorded with the decision)</label>
          <textarea id="reason" name="reason" rows={2} maxLength={2000} />
          <label for="keyFile">Your step-up key file (PKCS#8 PEM, as openssl or ets wrote it)</label>
          <input id="keyFile" name="keyFile" type="file" accept=".pem,.key,application/x-pem-file,text/plain" />
          <label for="keyPem">…or paste the key</label>
          <textarea id="keyPem" name="keyPem" rows={3} spellcheck={false} placeholder="-----BEGIN PRIVATE KEY-----" />
          <p class="muted small">The key is used in this page to sign, then forgotten: it is never sent to the service and never stored.</p>
          <button type="submit">Prepare what to sign</button>
          {problem ? <Notice kind="error">{problem}</Notice> : null}
          {stage.step === 'refused' ? (
            <Notice kind="error">
              <strong data-testid="refusal">{stage.message}</strong>
              <div class="small">{stage.detail}</div>
            </Notice>
          ) : null}
        </form>
      ) : null}
      {stage.step === 'review' ? (
        <div ref={review} tabIndex={-1} class="review" aria-labelledby="review-heading">
          <h3 id="review-heading">You are about to {stage.action} {spec.what}</h3>
          <p>
            This is exactly what your key signs (RFC 8785 canonical JSON). It is valid until <When at={String(stage.payload.expiresAt)} /> and can be used once.
          </p>
          <pre class="json signed-payload" tabIndex={0} aria-label="The payload to be signed">
            <code data-testid="payload">{canonicalText(stage.payload)}</code>
          </pre>
          <Json value={stage.payload} label="The same payload, laid out" />
          <div class="row">
            <button type="button" class={stage.action === 'reject' ? 'danger' : 'primary'} onClick={() => send(stage.action, stage.payload)}>
              Sign and {stage.action}
            </button>
            <button type="button" class="secondary" onClick={cancel}>
              Cancel
            </button>
          </div>
        </div>
      ) : null}
      {stage.step === 'sending' ? <Notice kind="info">Signing and sending…</Notice> : null}
    </section>
  );
}
