/** Types of scripts/reference/cli.mjs. */
import type { Command } from 'commander';
export const file: string;
/** The real program, from dist/. */
export function buildProgram(): Command;
/** The page of `program` (default: the real one, from dist/). */
export function generate(program?: Command): string;
