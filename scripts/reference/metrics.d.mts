/** Types of scripts/reference/metrics.mjs. */
export interface FamilyInfo {
  name: string;
  help: string;
  type: string;
  labelNames: readonly string[];
}
export const file: string;
export const command: string;
export function families(): FamilyInfo[];
export function generate(): string;
declare const generator: { file: string; generate(): string };
export default generator;
