/** Independent Redis masters for Redlock tests, on free ports, never 6379: test/harness/redis.mjs (shared with bench/). */
export { RedisServer, startRedisServers } from '../harness/redis.mjs';
export { freePort, freePorts, waitFor } from '../harness/process.mjs';
