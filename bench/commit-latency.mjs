#!/usr/bin/env node
/**
 * The floor under an un-prefetched claim: how long one durable INSERT takes on the MariaDB server,
 * sent once a second on an otherwise idle connection (as a daemon's claim is). Creates its own
 * database and drops it.
 *
 *   node bench/commit-latency.mjs [--count 40]   (BENCH_MYSQL_ADMIN=mysql://root@127.0.0.1:3306/)
 */
import mysql from 'mysql2/promise';
import { benchOptions } from './lib.mjs';

const flags = benchOptions(process.argv.slice(2), { strings: ['count'], usage: 'usage: node bench/commit-latency.mjs [--count 40]' });
const count = Number(flags.count ?? 40);
const admin = process.env.BENCH_MYSQL_ADMIN ?? 'mysql://root@127.0.0.1:3306/';
const db = `cron_bench_commit_${process.pid}`;

const c = await mysql.createConnection(admin);
await c.query(`CREATE DATABASE \`${db}\``);
try {
  await c.changeUser({ database: db });
  await c.query('CREATE TABLE probe (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(50) NOT NULL UNIQUE)');
  const [[flush]] = await c.query("SELECT @@innodb_flush_log_at_trx_commit AS v");
  const lat = [];
  for (let i = 0; i < count; i++) {
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000)));
    const t = performance.now();
    await c.execute('INSERT INTO probe (k) VALUES (?)', [`k-${i}`]);
    lat.push(performance.now() - t);
  }
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.ceil(p * lat.length) - 1)].toFixed(2);
  console.log(`durable INSERT once a second (innodb_flush_log_at_trx_commit=${flush.v}), ${lat.length} samples, ms: p50 ${q(0.5)} p90 ${q(0.9)} p99 ${q(0.99)} max ${lat[lat.length - 1].toFixed(2)}`);
} finally {
  await c.query(`DROP DATABASE IF EXISTS \`${db}\``);
  await c.end();
}
