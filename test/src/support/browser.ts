import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import pngjs from 'pngjs';

const { PNG } = pngjs;

/**
 * Headless Chromium from Debian's package (`apt-get install chromium`; .ci/run installs it),
 * driven by playwright-core. Playwright's own browser downloads are never used.
 */
export const CHROMIUM = process.env.ETS_TEST_CHROMIUM ?? '/usr/bin/chromium';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium is not installed at ${CHROMIUM}: apt-get install -y chromium (or set ETS_TEST_CHROMIUM).`);
  // --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}

/** How many distinct colours a PNG screenshot has (every 4th pixel of every 4th row): a blank page has one or two. */
export function distinctColours(png: Buffer): number {
  const image = PNG.sync.read(png);
  const colours = new Set<number>();
  for (let y = 0; y < image.height; y += 4) {
    for (let x = 0; x < image.width; x += 4) colours.add(image.data.readUIntBE((y * image.width + x) * 4, 3));
  }
  return colours.size;
}
