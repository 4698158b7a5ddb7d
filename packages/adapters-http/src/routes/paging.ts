import { DomainError } from '@ets/domain';

export const MAX_PAGE_SIZE = 100;
export const DEFAULT_PAGE_SIZE = 20;

/** The query parameters of a paged list (`RouteOptions.query`). */
export const PAGE_QUERY = ['page', 'pageSize'] as const;

/** `page` and `pageSize` (spec 7, 8): whole numbers, page from 1, pageSize 1 to 100. */
export function readPaging(query: Record<string, unknown>): { page: number; pageSize: number } {
  const read = (name: string, fallback: number): number => {
    const v = query[name];
    if (v === undefined) return fallback;
    if (typeof v !== 'string' || !/^\d{1,9}$/.test(v)) {
      throw new DomainError('invalid', `${name} must be a whole number; page starts at 1 and pageSize is at most ${MAX_PAGE_SIZE}.`);
    }
    return Number(v);
  };
  const page = read('page', 1);
  const pageSize = read('pageSize', DEFAULT_PAGE_SIZE);
  if (page < 1) throw new DomainError('invalid', 'page must be a whole number from 1.');
  if (pageSize < 1 || pageSize > MAX_PAGE_SIZE) throw new DomainError('invalid', `pageSize must be a whole number from 1 to ${MAX_PAGE_SIZE}.`);
  return { page, pageSize };
}
