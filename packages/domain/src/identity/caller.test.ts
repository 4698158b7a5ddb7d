import { describe, expect, it } from '@jest/globals';
import { mayAssertPrincipal, mayRequestCapability, mayUseTenant, type Caller } from './caller.js';

const caller = (over: Partial<Caller> = {}): Caller => ({
  callerId: 'agent-1',
  allowedCapabilities: [],
  allowedPrincipalIds: [],
  allowedTenantIds: [],
  ...over,
});

describe('caller rules (spec 5.7, 5.8, 4.3.3)', () => {
  it('lets a key assert only its own id when it lists no principals', () => {
    expect(mayAssertPrincipal(caller(), 'agent-1')).toBe(true);
    expect(mayAssertPrincipal(caller(), 'someone-else')).toBe(false);
    expect(mayAssertPrincipal(caller(), '')).toBe(false);
    expect(mayAssertPrincipal(caller(), undefined)).toBe(false);
  });
  it('uses the listed principals, and only them, when the key lists some', () => {
    const c = caller({ allowedPrincipalIds: ['p1', 'p2'] });
    expect(mayAssertPrincipal(c, 'p2')).toBe(true);
    expect(mayAssertPrincipal(c, 'agent-1')).toBe(false);
  });
  it('allows no capability by default, all with *', () => {
    expect(mayRequestCapability(caller(), 'sandbox:echo')).toBe(false);
    expect(mayRequestCapability(caller({ allowedCapabilities: ['sandbox:echo'] }), 'sandbox:echo')).toBe(true);
    expect(mayRequestCapability(caller({ allowedCapabilities: ['*'] }), 'payments:transfer')).toBe(true);
  });
  it('ignores a request without a tenant and refuses an unlisted one', () => {
    expect(mayUseTenant(caller(), undefined)).toBe(true);
    expect(mayUseTenant(caller(), 't1')).toBe(false);
    expect(mayUseTenant(caller({ allowedTenantIds: ['t1'] }), 't1')).toBe(true);
  });
});
