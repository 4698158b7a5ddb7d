/**
 * Published policy versions (spec 9.3). A published version never changes; requests name an exact
 * version; the version "in effect" of a policy name is its most recently approved version. Every
 * published version was approved by a human (maker-checker), shipped ones included.
 */
import { notFound, type DomainError } from '../shared/errors.js';
import type { PolicyDocument, PolicyRef } from './document.js';

export interface PolicyVersion {
  name: string;
  version: string;
  content: PolicyDocument;
  /** SHA-256 (hex) of the RFC 8785 canonical form of `content`. */
  contentHash: string;
  /** The pending change that published it. */
  changeId: string;
  proposer: string;
  approvedBy: string;
  /** When the change was approved: orders versions of one name ("in effect" = the latest). */
  approvedAt: string;
}

export interface PolicyStore {
  /**
   * Stores a version unless that name and version is already stored, and returns what is stored
   * afterwards: an existing version is never overwritten (compare its `changeId`).
   */
  publish(version: PolicyVersion): Promise<PolicyVersion>;
  find(ref: PolicyRef): Promise<PolicyVersion | undefined>;
  /** The version in effect of every policy name, ordered by name. */
  inEffect(): Promise<PolicyVersion[]>;
  /**
   * The version in effect of one name, as `inEffect` would give it: read on every MCP tool call,
   * so it reads one name's versions and no document.
   */
  versionInEffect(name: string): Promise<string | undefined>;
}

/** Spec 7: 404 without a code. */
export const policyNotFound = (ref: PolicyRef): DomainError =>
  notFound(`Policy '${ref.name}' version '${ref.version}' was not found.`);

/** What `GET /policies/in-effect` lists per policy. */
export interface InEffectPolicy {
  name: string;
  version: string;
  contentHash: string;
  approvedAt: string;
  approvedBy: string;
  /** True when the policy requires an authority grant for the calling key (spec 2.8, 4.3.11). */
  authorityGrantRequired: boolean;
  /** `sourced`: the signals whose value is asked from a business system (`signalSources`). */
  signals: { sourced: string[] };
}

export function toInEffectPolicy(v: PolicyVersion): InEffectPolicy {
  return {
    name: v.name,
    version: v.version,
    contentHash: v.contentHash,
    approvedAt: v.approvedAt,
    approvedBy: v.approvedBy,
    authorityGrantRequired: v.content.requireAuthorityGrant === true,
    signals: { sourced: Object.keys(v.content.signalSources ?? {}) },
  };
}
