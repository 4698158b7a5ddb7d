import { Platform1763683200000 } from './0001-platform.js';
import { Identity1763683300000 } from './0002-identity.js';
import { Governance1763683400000 } from './0003-governance.js';
import { Execution1763683500000 } from './0004-execution.js';
import { Verification1763683600000 } from './0005-verification.js';
import { GovernanceApplyClaim1763683700000 } from './0006-governance-apply-claim.js';
import { Attestation1763683900000 } from './0008-attestation.js';
import { ExternalConnectors1763684000000 } from './0009-external-connectors.js';
import { SigningProviders1763684300000 } from './0012-signing-providers.js';
import { ReadScopeChainOrderInFlight1763684400000 } from './0013-read-scope-chain-order-in-flight.js';
import { BusinessValidation1763684500000 } from './0014-business-validation.js';
import { TransparencyLog1763684700000 } from './0016-transparency-log.js';
import { DecisionInputs1763684800000 } from './0017-decision-inputs.js';
import { PendingItemNotices1763684900000 } from './0018-pending-item-notices.js';
import { HeldTransactions1763685000000 } from './0019-held-transactions.js';
import { ConsoleSessions1763685200000 } from './0020-console-sessions.js';
import { McpServers1763685300000 } from './0021-mcp-servers.js';
import { ProposerStepUpKey1763685400000 } from './0022-proposer-step-up-key.js';

/** Every migration, in order. New features append here; an applied migration never changes. */
export const MIGRATIONS = [
  Platform1763683200000,
  Identity1763683300000,
  Governance1763683400000,
  Execution1763683500000,
  Verification1763683600000,
  GovernanceApplyClaim1763683700000,
  Attestation1763683900000,
  ExternalConnectors1763684000000,
  SigningProviders1763684300000,
  ReadScopeChainOrderInFlight1763684400000,
  BusinessValidation1763684500000,
  TransparencyLog1763684700000,
  DecisionInputs1763684800000,
  PendingItemNotices1763684900000,
  HeldTransactions1763685000000,
  ConsoleSessions1763685200000,
  McpServers1763685300000,
  ProposerStepUpKey1763685400000,
];
