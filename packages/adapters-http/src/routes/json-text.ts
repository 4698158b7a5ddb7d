import type { Request, Response } from 'express';
import type { TextPage } from '@ets/domain';

/**
 * Signed records are served from the JSON text the store kept, never parsed and serialised again:
 * the bytes are those `res.json` would send for the parsed record (the store wrote them with
 * JSON.stringify), with the same `json escape` of `<`, `>` and `&` when the app sets it.
 */
const escapeJson = (req: Request, text: string): string =>
  req.app.get('json escape') ? text.replace(/[<>&]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : text;

/** One stored JSON text as the whole body. */
export function sendJsonText(req: Request, res: Response, text: string, status = 200): void {
  res.status(status).type('application/json').send(escapeJson(req, text));
}

/** `{…fields, [name]: <stored text or null>, …}`: an object of plain fields with stored texts beside them. */
export function jsonWithTexts(fields: object, texts: Record<string, string | undefined>): string {
  const head = JSON.stringify(fields);
  const tail = Object.entries(texts).map(([name, text]) => `${JSON.stringify(name)}:${text ?? 'null'}`);
  return tail.length === 0 ? head : `${head.slice(0, -1)}${head.length > 2 ? ',' : ''}${tail.join(',')}}`;
}

/**
 * Writes `{"items":[…],"page":…,"pageSize":…,"total":…}` as the items come from the store, each
 * item its stored text, waiting for the client to take what was written (backpressure) before
 * reading more: a page costs the process a few records of memory, not the page. A store failure
 * before the first byte is an ordinary error response; after it, the connection is cut, so that
 * the client never takes a truncated page for a whole one.
 */
export async function streamTextPage(req: Request, res: Response, page: TextPage): Promise<void> {
  const items = page.items[Symbol.asyncIterator]();
  let next = await items.next();
  res.status(200).type('application/json');
  try {
    res.write('{"items":[');
    for (let first = true; !next.done; first = false) {
      if (!first) res.write(',');
      if (!res.write(escapeJson(req, next.value)) && !(await drained(res))) return; // the client left
      next = await items.next();
    }
    res.end(`],"page":${page.page},"pageSize":${page.pageSize},"total":${page.total}}`);
  } catch (e) {
    res.destroy();
    throw e;
  } finally {
    await items.return?.();
  }
}

/** Resolves true once the response can take more, false when its connection closed first. */
function drained(res: Response): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (ok: boolean) => () => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}
