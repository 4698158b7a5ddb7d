/** Handbook download leads (spec 1.11): one per address, compared case-insensitively. */
export interface HandbookLeadStore {
  /** Stores the address unless an equal one (ignoring case) is already stored. Returns true when new. */
  add(email: string, at: Date): Promise<boolean>;
}
