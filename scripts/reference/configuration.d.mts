/** Types of scripts/reference/configuration.mjs. */
import type { Command } from 'commander';
import type { SettingSpec } from '../../src/config/settings.js';
export const file: string;
/** The page of `settings` and `program` (default: the real ones, from dist/). */
export function generate(settings?: Record<string, SettingSpec>, program?: Command): string;
