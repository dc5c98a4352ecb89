import { describe, expect, it } from 'vitest';
import { Coalescer, batched } from '../../src/batch/coalescer.js';

/** A send whose batches stay out until released by hand, recording what each batch held. */
function manualSend() {
  const batches: number[][] = [];
  const pending: Array<() => void> = [];
  const send = (items: number[]) => new Promise<number[]>((resolve) => {
    batches.push(items);
    pending.push(() => resolve(items.map((i) => i * 10)));
  });
  return { batches, send, releaseOldest: () => pending.shift()!() };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('Coalescer', () => {
  it('sends the calls of one turn as one batch and answers each caller with its own result', async () => {
    const { batches, send, releaseOldest } = manualSend();
    const call = batched(100, send);
    const answers = Promise.all([call(1), call(2), call(3)]);
    await turn();
    expect(batches).toEqual([[1, 2, 3]]);
    releaseOldest();
    expect(await answers).toEqual([10, 20, 30]);
  });

  it('splits at max', async () => {
    const { batches, send, releaseOldest } = manualSend();
    const call = batched(2, send);
    const answers = Promise.all([1, 2, 3, 4, 5].map(call));
    await turn();
    expect(batches).toEqual([[1, 2], [3, 4], [5]]);
    releaseOldest(); releaseOldest(); releaseOldest();
    expect(await answers).toEqual([10, 20, 30, 40, 50]);
  });

  it('with maxInFlight, later calls wait for a free slot and then go together (group commit)', async () => {
    const { batches, send, releaseOldest } = manualSend();
    const call = batched(100, send, 1);
    const first = call(1);
    await turn();
    expect(batches).toEqual([[1]]);
    // While the first batch is out, calls of several turns queue up instead of each going alone.
    const later = [call(2)];
    await turn();
    later.push(call(3), call(4));
    await turn();
    expect(batches).toEqual([[1]]);
    releaseOldest();
    expect(await first).toBe(10);
    // The freed slot is taken on the next turn after the batch settled (its finally, then setImmediate).
    await turn(); await turn();
    expect(batches).toEqual([[1], [2, 3, 4]]);
    releaseOldest();
    expect(await Promise.all(later)).toEqual([20, 30, 40]);
  });

  it('with maxInFlight, a backlog larger than max leaves in batches of max, as slots free', async () => {
    const { batches, send, releaseOldest } = manualSend();
    const call = batched(2, send, 1);
    const all = Promise.all([1, 2, 3, 4, 5].map(call));
    await turn();
    expect(batches).toEqual([[1, 2]]);
    releaseOldest();
    await turn(); await turn();
    expect(batches).toEqual([[1, 2], [3, 4]]);
    releaseOldest();
    await turn(); await turn();
    expect(batches).toEqual([[1, 2], [3, 4], [5]]);
    releaseOldest();
    expect(await all).toEqual([10, 20, 30, 40, 50]);
  });

  it('drain waits for the queued calls too, not only for the batches already out', async () => {
    const sent: string[][] = [];
    const c = new Coalescer<string, string>(10, async (_group, batch) => {
      sent.push(batch.map((q) => q.item));
      await new Promise((r) => setTimeout(r, 20));
      for (const q of batch) q.resolve(q.item.toUpperCase());
    }, 1);
    const a = c.add('n1', 'a');
    c.flush();
    const b = c.add('n1', 'b');
    expect(c.waiting).toBe(1);
    await c.drain();
    expect(sent).toEqual([['a'], ['b']]);
    expect(await Promise.all([a, b])).toEqual(['A', 'B']);
    expect(c.waiting).toBe(0);
  });

  it('a failed batch fails its callers only; the next batch goes out', async () => {
    let n = 0;
    const call = batched(100, async (items: number[]) => {
      n += 1;
      if (n === 1) throw new Error('store down');
      return items;
    }, 1);
    const first = expect(call(1)).rejects.toThrow('store down');
    await turn();
    const second = call(2);
    await first;
    expect(await second).toBe(2);
  });
});
