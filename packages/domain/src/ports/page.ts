/** One page of a list (CONTRACT "Requests, reads and lists"): pages start at 1. */
export interface Page<T> {
  items: T[];
  page: number;
  pageSize: number;
  total: number;
}
