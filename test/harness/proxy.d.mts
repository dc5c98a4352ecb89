/** Types of test/harness/proxy.mjs. */
export class StoreProxy {
  port: number;
  constructor(targetPort: number, targetHost?: string);
  get isCut(): boolean;
  start(port?: number): Promise<number>;
  urlFor(url: string): string;
  cut(): Promise<void>;
  restore(): Promise<void>;
  hole(): void;
  lift(): void;
  armOnce(pattern: RegExp, fn: () => void): void;
  slow(ms: number): void;
  close(): Promise<void>;
}
export function accepts(port: number): Promise<boolean>;
