/**
 * A TCP proxy in front of a database that can turn into a black hole (hole() / lift()): the store
 * proxy of test/harness/proxy.mjs (shared with bench/).
 */
export { StoreProxy as BlackHoleProxy } from '../harness/proxy.mjs';
