import type { EntitySchema } from 'typeorm';

/** ORM mappings live here, at the edge; domain objects carry no decorators. */
export const ENTITY_SCHEMAS: EntitySchema[] = [];
