/**
 * Routes are in the URL's fragment (`/console#/item/policy/<id>`): the service serves one page,
 * every view has an address a person can bookmark or send, and back and forward work.
 */
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { page: 'inbox' }
  | { page: 'item'; kind: string; id: string }
  | { page: 'records'; query: URLSearchParams }
  | { page: 'record'; id: string }
  | { page: 'log' };

export function parseRoute(hash: string): Route {
  const [path = '', search = ''] = hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'item' && parts.length === 3) return { page: 'item', kind: parts[1]!, id: parts[2]! };
  if (parts[0] === 'records' && parts.length === 2) return { page: 'record', id: parts[1]! };
  if (parts[0] === 'records') return { page: 'records', query: new URLSearchParams(search) };
  if (parts[0] === 'log') return { page: 'log' };
  return { page: 'inbox' };
}

export const href = {
  inbox: () => '#/inbox',
  item: (kind: string, id: string) => `#/item/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`,
  records: (query?: URLSearchParams) => `#/records${query && [...query].length ? `?${query}` : ''}`,
  record: (id: string) => `#/records/${encodeURIComponent(id)}`,
  log: () => '#/log',
};

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const changed = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}
