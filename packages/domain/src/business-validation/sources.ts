/**
 * Business signal sources (spec 1.7, 2.8; CONTRACT "Business signal sources"): the business
 * systems a policy may name as the owner of a fact. Registered and revoked by maker-checker; what
 * a proposal may say, each rule broken answered 400 naming the field.
 */
import type { PendingChange } from '../governance/change.js';
import { changeViewBase, changeViewDecision, readProposalFields, type RegistryChangeView } from '../governance/governed-registry.js';
import { readEndpoint } from '../egress/endpoint.js';
import { invalid } from '../shared/errors.js';
import { readName } from '../shared/names.js';
import type { SignalSourceRegistration, SourceProofVerifier } from './ports.js';

export const SIGNAL_SOURCE_CHANGE_KIND = 'business-signal-source';
const PUBLIC_KEY_MAX_LENGTH = 4096;


export type SourceRegisterPayload = { kind: 'register'; name: string; endpoint: string; publicKey: string | null; keyId: string | null };
/** A revoke names the registration that was active when it was proposed; that is what it ends. */
export type SourceRevokePayload = { kind: 'revoke'; name: string; registrationId: string };
export type SignalSourceChangePayload = SourceRegisterPayload | SourceRevokePayload;

/** The change as the API shows it (bare object, the contract's property names). */
export interface SignalSourceChangeView extends RegistryChangeView {
  name: string;
  endpoint?: string;
  publicKey?: string | null;
  keyId?: string | null;
}

export function toSourceChangeView(c: PendingChange<SignalSourceChangePayload>): SignalSourceChangeView {
  const p = c.payload;
  return {
    ...changeViewBase(c),
    name: p.name,
    ...(p.kind === 'register' ? { endpoint: p.endpoint, publicKey: p.publicKey, keyId: p.keyId } : { registrationId: p.registrationId }),
    ...changeViewDecision(c),
  };
}

export const describeSourceChange = (c: PendingChange<SignalSourceChangePayload>): string =>
  c.payload.kind === 'register'
    ? `register business signal source '${c.payload.name}' at ${c.payload.endpoint} (${c.payload.keyId ? `key ${c.payload.keyId}` : 'no key: trusted by TLS alone'})`
    : `revoke business signal source '${c.payload.name}' (registration ${c.payload.registrationId})`;

export const sourceRegistrationOf = (change: PendingChange<SignalSourceChangePayload>): SignalSourceRegistration => {
  const p = change.payload as SourceRegisterPayload;
  return {
    registrationId: change.id,
    name: p.name,
    endpoint: p.endpoint,
    publicKey: p.publicKey,
    keyId: p.keyId,
    proposer: change.proposer,
    approvedBy: change.decider!,
    registeredAt: change.decidedAt!,
  };
};

const FIELDS = {
  register: ['kind', 'name', 'endpoint', 'publicKey', 'reason'],
  revoke: ['kind', 'name', 'reason'],
} as const;

export type SourceProposalInput = { kind: 'register'; payload: Omit<SourceRegisterPayload, 'kind'> } | { kind: 'revoke'; name: string };

/** The rules a proposal must keep that need no lookup. `reason` is read by maker-checker; where the endpoint resolves is checked by the caller. */
export function readSourceProposal(input: unknown, keys: Pick<SourceProofVerifier, 'keyIdOf'>): SourceProposalInput {
  const { kind, body } = readProposalFields(input, FIELDS, '{"kind": "register" | "revoke", "name": "…", …}');
  const name = readName('sourceName', body.name, 'name');
  if (kind === 'revoke') return { kind, name };
  const endpoint = readEndpoint(body.endpoint);
  if (!endpoint.ok) throw invalid(`endpoint ${endpoint.problem}`);
  let publicKey: string | null = null;
  let keyId: string | null = null;
  if (body.publicKey !== undefined && body.publicKey !== null) {
    const id = typeof body.publicKey === 'string' && body.publicKey.length <= PUBLIC_KEY_MAX_LENGTH ? keys.keyIdOf(body.publicKey) : undefined;
    if (!id) throw invalid('publicKey must be an Ed25519 public key in SPKI PEM form (-----BEGIN PUBLIC KEY-----), or absent for a source trusted by TLS alone.');
    publicKey = (body.publicKey as string).trim() + '\n';
    keyId = id;
  }
  return { kind, payload: { name, endpoint: endpoint.endpoint.url, publicKey, keyId } };
}
