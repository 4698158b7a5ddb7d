#!/usr/bin/env node
// A bare Express 5 route of `npm run bench`: the same framework the service uses, reading the same
// request body as JSON and answering a small JSON object, and nothing else. What the HTTP layer
// alone costs on this machine.
// Usage: node bench/bare-express.mjs   (env PORT, default any free port); prints `listening <port>`.
import express from 'express';

const app = express();
app.disable('x-powered-by');
app.post('/execute', express.json({ limit: '1mb' }), (req, res) => {
  res.json({ executionStatus: 'EXECUTED', businessTransactionId: req.body?.businessTransactionId ?? null });
});
const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => console.log(`listening ${server.address().port}`));
server.keepAliveTimeout = 60_000;
process.on('SIGTERM', () => server.close(() => process.exit(0)));
