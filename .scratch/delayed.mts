import { jobgateDelayedEnqueue } from '../bench/engine.js';
import { openServer } from '../bench/support/postgres.js';
const server = await openServer();
try {
  for (const idle of [0, 2]) {
    const p = await jobgateDelayedEnqueue(server, idle);
    console.log(`${process.env.SIDE} idle=${idle} p50=${p.p50.toFixed(2)} p95=${p.p95.toFixed(2)} p99=${p.p99.toFixed(2)}`);
  }
} finally {
  await server.close();
}
