import type { Lease, LockProvider } from './lock.js';

/** No Redis: every claim goes to the row, which alone decides (the embedded default). */
export class NoLockProvider implements LockProvider {
  readonly kind = 'none' as const;
  async connect(): Promise<void> {}
  async tryAcquire(key: string): Promise<Lease> {
    return { key, extend: async () => 'ok', release: async () => {}, settle: () => {} };
  }
  state() {
    return 'none' as const;
  }
  async close(): Promise<void> {}
}
