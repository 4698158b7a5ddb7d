export type Readiness = { ready: true } | { ready: false; reason: string };

/** Whether storage answers and holds the tables the service cannot run without. */
export interface StorageHealth {
  readiness(): Promise<Readiness>;
}
