import { holdSignals } from './signals.js';

// Before anything else loads: a SIGTERM during start-up must not kill the daemon by the signal.
holdSignals();
const { main } = await import('./main.js');
await main(process.argv);
