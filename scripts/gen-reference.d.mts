/** Types of scripts/gen-reference.mjs (for the test that keeps the reference pages current). */
export interface ReferencePage {
  /** The page's path, relative to the project root. */
  file: string;
  /** The page's text, from the code as built in dist/. */
  generate(): string | Promise<string>;
}
export const ROOT: string;
export const PAGES: ReferencePage[];
export function writePages(pages?: ReferencePage[]): Promise<void>;
