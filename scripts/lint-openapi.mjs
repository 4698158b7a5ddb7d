#!/usr/bin/env node
// Lints the served OpenAPI document of every profile with Redocly CLI (config: redocly.yaml).
// The document is merged from fragments at start, so the merged result is what is linted, exactly
// as GET /openapi.yaml serves it. Needs `npm run build` first (it reads the compiled merger).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { buildOpenApiDocument, openApiYaml } = await import(path.join(root, 'packages/adapters-http/dist/openapi-document.js'));
const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-openapi-'));
try {
  const files = ['transaction', 'attestation', 'attestation-simple'].map((profile) => {
    const file = path.join(dir, `openapi-${profile}.yaml`);
    writeFileSync(file, openApiYaml(buildOpenApiDocument(profile)));
    return file;
  });
  const redocly = path.join(root, 'node_modules/@redocly/cli/bin/cli.js');
  const r = spawnSync(process.execPath, [redocly, 'lint', '--config', path.join(root, 'redocly.yaml'), '--format', 'codeframe', ...files], {
    stdio: 'inherit',
    // No usage reports and no update check: CI and air-gapped machines reach no such host.
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  });
  process.exitCode = r.status ?? 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
