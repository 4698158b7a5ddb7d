import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeFileAtomic } from './write-file-atomic.js';

describe('writeFileAtomic', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'ets-atomic-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('creates or replaces the file and leaves no temporary file beside it', () => {
    const file = path.join(dir, 'state.json');
    writeFileAtomic(file, 'one\n');
    writeFileAtomic(file, 'two\n', { fsync: true });
    expect(readFileSync(file, 'utf8')).toBe('two\n');
    expect(readdirSync(dir)).toEqual(['state.json']);
  });

  it('gives the file exactly the mode asked for, also over a file and a leftover temporary file of another mode', () => {
    if (process.platform === 'win32') return;
    const file = path.join(dir, 'secret.pem');
    writeFileSync(file, 'old', { mode: 0o644 });
    writeFileSync(`${file}.${process.pid}.tmp`, 'half', { mode: 0o666 });
    writeFileAtomic(file, 'new', { mode: 0o600, fsync: true });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8')).toBe('new');
    expect(readdirSync(dir)).toEqual(['secret.pem']);
  });
});
