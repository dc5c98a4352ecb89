/** Types of test/harness/effects.mjs. */
import type { FaultEffect } from './job-sources.mjs';

export function byPeriod(effects: FaultEffect[]): Map<string, Map<number, FaultEffect[]>>;
export function duplicates(effects: FaultEffect[]): { sameAttempt: string[]; samePeriod: string[] };
export function duplicateStarts(effects: FaultEffect[]): string[];
export function overlappingAttempts(effects: FaultEffect[], deaths: Map<string, number>, pausedOk?: Set<string>): string[];
export function secondsBetween(fromMs: number, toMs: number, stepMs?: number): string[];
