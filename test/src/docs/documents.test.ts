import { describe, expect, it } from '@jest/globals';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '@ets/test-support';
import { OPERATOR_GUIDE_MARKDOWN } from '../../../packages/adapters-http/src/routes/docs.js';
import { GUIDE_FILE_LINK, renderGuide } from '../../../packages/adapters-http/src/routes/guide-page.js';

/**
 * The README and the operator guide stand alone: they link only to files that are in the
 * repository and to headings that exist, and refer to the project's own documents (the guide's
 * sections, the OpenAPI document), never to documents a clone does not have.
 */
const GUIDE_DIR = 'packages/adapters-http/assets/guide';
const guideFiles = readdirSync(path.join(REPO_ROOT, GUIDE_DIR))
  .filter((f) => f.endsWith('.md'))
  .sort()
  .map((f) => `${GUIDE_DIR}/${f}`);
const DOCUMENTS = ['README.md', ...guideFiles];
/** Also checked for their links: documents the README links to. */
const LINKED = ['packages/client/README.md'];
/** Routes of the service the guide may link to: it is served by the service. */
const SERVICE_ROUTES = ['/reference', '/openapi.yaml', '/documentation'];

const read = (file: string) => readFileSync(path.join(REPO_ROOT, file), 'utf8');
/** The text outside fenced code blocks and inline code, where links and references are prose. */
const prose = (markdown: string) => markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');

/** The anchors of a Markdown file's headings, as GitHub makes them (a repeated one gets -1, -2, …). */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, text] of prose(markdown).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const plain = text!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[`*_]/g, (c) => (c === '_' ? '_' : ''));
    const base = plain.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every link target and image source of a Markdown file's prose: `[text](target)`, `![alt](target)`, `<img src>`. */
function linksOf(markdown: string): { target: string; alt?: string; image: boolean }[] {
  const text = markdown.replace(/^```[\s\S]*?^```/gm, '');
  const md = [...text.matchAll(/(!?)\[((?:[^\][]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => ({ target: m[3]!, alt: m[2], image: m[1] === '!' }));
  const html = [...text.matchAll(/<img\b[^>]*\bsrc="([^"]+)"[^>]*>/g)].map((m) => ({ target: m[1]!, alt: /\balt="([^"]*)"/.exec(m[0])?.[1], image: true }));
  return [...md, ...html];
}

describe('the README and the operator guide', () => {
  it.each(DOCUMENTS)('%s refers to no document outside the repository (no spec sections, no CONTRACT, no ../shared)', (file) => {
    const text = read(file);
    const found = [
      ...text.matchAll(/\bspec(?:ification)? \d+(?:\.\d+)*/gi),
      ...text.matchAll(/\bCONTRACT\b/g),
      ...text.matchAll(/\.\.\/shared\b/g),
    ].map((m) => m[0]);
    expect(found).toEqual([]);
  });

  it.each([...DOCUMENTS, ...LINKED])('%s links only to files in the repository and to headings that exist', (file) => {
    const problems: string[] = [];
    const isGuide = file.startsWith(`${GUIDE_DIR}/`);
    for (const { target, alt, image } of linksOf(read(file))) {
      if (/^(https?:|mailto:)/.test(target)) continue;
      if (image && !alt?.trim()) problems.push(`${target}: an image without alt text`);
      if (target.startsWith('/')) {
        if (!(isGuide && SERVICE_ROUTES.includes(target))) problems.push(`${target}: a link from the root, which is no file of the repository`);
        continue;
      }
      const [relative, anchor] = target.split('#') as [string, string | undefined];
      const resolved = relative === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), relative));
      const absolute = path.join(REPO_ROOT, resolved);
      if (resolved.startsWith('..') || !existsSync(absolute) || /(^|\/)(node_modules|dist)\//.test(resolved)) {
        problems.push(`${target}: no such file in the repository (${resolved})`);
        continue;
      }
      // The guide is also served as one page: its links may only go to its own files, which the page maps to its sections.
      if (isGuide && relative !== '' && !GUIDE_FILE_LINK.test(relative + (anchor ? `#${anchor}` : ''))) {
        problems.push(`${target}: the guide links only to its own files (NNN-name.md#anchor), which the served page maps to its sections`);
      }
      if (anchor !== undefined) {
        if (!resolved.endsWith('.md') || statSync(absolute).isDirectory()) problems.push(`${target}: an anchor into a file that is not Markdown`);
        else if (!anchorsOf(read(resolved)).has(anchor)) problems.push(`${target}: ${resolved} has no heading with the anchor #${anchor}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('the guide served as one page: each link between its files lands on a section of the page', () => {
    const html = renderGuide(OPERATOR_GUIDE_MARKDOWN);
    const ids = new Set([...html.matchAll(/\bid="([^"]+)"/g)].map((m) => m[1]));
    const hrefs = [...html.matchAll(/<a href="([^"]+)"/g)].map((m) => m[1]!);
    expect(hrefs.filter((h) => /\.md(#|$)/.test(h))).toEqual([]);
    expect(hrefs.filter((h) => h.startsWith('#') && !ids.has(h.slice(1)))).toEqual([]);
    expect(hrefs.filter((h) => h.startsWith('/') && !SERVICE_ROUTES.includes(h))).toEqual([]);
  });

  it('the README is a front page: short, a picture of where the service sits, the quick start, and links into the guide', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThan(130);
    const headings = [...readme.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    expect(headings).toEqual(['Quick start: a verified action in five commands', 'Next steps', 'Reference']);
    const picture = linksOf(readme).find((l) => l.image);
    expect(picture?.target).toBe('docs/where-it-sits.svg');
    expect(picture?.alt?.length).toBeGreaterThan(100);
    const svg = read('docs/where-it-sits.svg');
    // Readable in light and dark themes: its own card, with colours for each.
    expect(svg).toMatch(/@media \(prefers-color-scheme: dark\)/);
    expect(svg).toMatch(/<title id="title">/);
    // Terms are explained before they are used: none of the profile letters on the front page.
    expect(readme).not.toMatch(/\bprofile [AT]\b/);
    // Every guide page it names is linked.
    expect(linksOf(readme).filter((l) => l.target.startsWith(`${GUIDE_DIR}/`)).length).toBeGreaterThanOrEqual(8);
  });
});
