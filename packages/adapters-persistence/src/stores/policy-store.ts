import type { DataSource } from 'typeorm';
import type { PolicyDocument, PolicyRef, PolicyStore, PolicyVersion } from '@ets/domain';
import { PolicyVersionEntity, type PolicyVersionRow } from '../entities/governance.js';
import { insertOrIgnore } from './serial-writes.js';

const toVersion = (r: PolicyVersionRow): PolicyVersion => ({
  name: r.name,
  version: r.version,
  content: JSON.parse(r.content) as PolicyDocument,
  contentHash: r.contentHash,
  changeId: r.changeId,
  proposer: r.proposer,
  approvedBy: r.approvedBy,
  approvedAt: r.approvedAt,
});

/**
 * Published policy versions in `policy_versions`. Rows are only inserted, never updated: an
 * insert of a name and version that exists inserts nothing (unique index), whoever races.
 */
export class TypeOrmPolicyStore implements PolicyStore {
  constructor(private readonly ds: DataSource) {}

  private get repo() {
    return this.ds.getRepository(PolicyVersionEntity);
  }

  async publish(v: PolicyVersion): Promise<PolicyVersion> {
    await insertOrIgnore(this.ds, PolicyVersionEntity, {
      name: v.name,
      version: v.version,
      content: JSON.stringify(v.content),
      contentHash: v.contentHash,
      changeId: v.changeId,
      proposer: v.proposer,
      approvedBy: v.approvedBy,
      approvedAt: v.approvedAt,
    });
    const stored = await this.find(v);
    if (!stored) throw new Error(`policy version ${v.name} ${v.version} was not stored`);
    return stored;
  }

  async find(ref: PolicyRef): Promise<PolicyVersion | undefined> {
    const row = await this.repo.findOneBy({ name: ref.name, version: ref.version });
    return row ? toVersion(row) : undefined;
  }

  /** Per name, the row no other row of that name was approved after (ties: inserted later). */
  async inEffect(): Promise<PolicyVersion[]> {
    const rows = await this.repo
      .createQueryBuilder('p')
      .where(
        `NOT EXISTS (SELECT 1 FROM policy_versions q WHERE q.name = p.name
           AND (q.approved_at > p.approved_at OR (q.approved_at = p.approved_at AND q.seq > p.seq)))`,
      )
      .orderBy('p.name', 'ASC')
      .getMany();
    return rows.map(toVersion);
  }

  /** The same order as `inEffect`: approved last, and of those inserted last. */
  async versionInEffect(name: string): Promise<string | undefined> {
    const row = await this.repo
      .createQueryBuilder('p')
      .select('p.version', 'version')
      .where('p.name = :name', { name })
      .orderBy('p.approved_at', 'DESC')
      .addOrderBy('p.seq', 'DESC')
      .limit(1)
      .getRawOne<{ version: string }>();
    return row?.version;
  }
}
