import { EntitySchema } from 'typeorm';

export interface HandbookLeadRow {
  emailKey: string;
  email: string;
  createdAt: string;
}

export const HandbookLeadEntity = new EntitySchema<HandbookLeadRow>({
  name: 'HandbookLead',
  tableName: 'handbook_leads',
  columns: {
    emailKey: { name: 'email_key', type: 'varchar', length: 320, primary: true },
    email: { name: 'email', type: 'varchar', length: 320 },
    createdAt: { name: 'created_at', type: 'varchar', length: 32 },
  },
});
