/**
 * The runtime's entry points, imported on first call: they bring in knex, the database drivers,
 * ioredis and redlock, which a command loads only when it opens a store (`--help` never does).
 */
import type * as RuntimeModule from '../runtime.js';

type Runtime = typeof RuntimeModule;

export const openStore: Runtime['openStore'] = async (...args) => (await import('../runtime.js')).openStore(...args);
export const openStores: Runtime['openStores'] = async (...args) => (await import('../runtime.js')).openStores(...args);
export const openRuntime: Runtime['openRuntime'] = async (...args) => (await import('../runtime.js')).openRuntime(...args);
