/** Types of scripts/reference/job-file.mjs. */
import type { FieldSpec } from '../../src/jobs/fields.js';
export const file: string;
/** The page of `fields` (default: the real ones, from dist/). */
export function generate(fields?: Record<string, FieldSpec>): string;
