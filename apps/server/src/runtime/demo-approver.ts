import { signStepUpPayload } from '@ets/adapters-crypto';
import type { ApprovalPayload, ApprovalSigner } from '@ets/domain';

/**
 * The demo approver of sandbox mode (CONTRACT "Signed approvals and overrides in profile T"). Its
 * key pair is fixed and published here and in the operator guide, private half included: anyone
 * can sign as it, which is why the service accepts its approvals only in sandbox mode and only for
 * sandbox actions (`ApprovalChecker`), and signs with it only in sandbox mode
 * (`POST /sandbox/approvals`). It is never a key of a real approver.
 */
export const DEMO_APPROVER_PUBLIC_KEY_PEM = `-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAfS+vebCdSOpoL9N1LX72VgnvF+w6/VaHI6fS95Qgm88=
-----END PUBLIC KEY-----
`;

const DEMO_APPROVER_PRIVATE_KEY_PEM = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIESnhMFRjD+8+9TNmJCdbVf5/Jd7IvHcB0s7ezIZdh/G
-----END PRIVATE KEY-----
`;

/** Signs sandbox approvals as the demo approver (bound in sandbox mode only). */
export const demoApproverSigner: ApprovalSigner = {
  sign: async (payload: ApprovalPayload) => signStepUpPayload(DEMO_APPROVER_PRIVATE_KEY_PEM, payload),
};
