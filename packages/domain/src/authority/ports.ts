import type { Page } from '../ports/page.js';
import type { AuthorityGrant } from './grants.js';

/** Grants are never deleted: a revoke sets `revokedAt`, and an expired grant stays stored. */
export interface AuthorityGrantStore {
  /** Stores the grant; storing it again (a retried apply) changes nothing. */
  activate(grant: AuthorityGrant): Promise<void>;
  /** Ends a grant; ending an ended one changes nothing. */
  revoke(grantId: string, revokedAt: string, revokeChangeId: string): Promise<void>;
  get(grantId: string): Promise<AuthorityGrant | undefined>;
  /** The grantee's grants for the action that are not revoked (expired ones too), the latest expiry first. */
  forGrantee(grantee: string, action: string): Promise<AuthorityGrant[]>;
  /** Grants in force at `now` (not revoked, not expired), by grantee, action and grant time. */
  listInForce(now: string, page: number, pageSize: number): Promise<Page<AuthorityGrant>>;
}
