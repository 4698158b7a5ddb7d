import { Marked, type Tokens } from 'marked';

/** `First-start key` → `first-start-key`; a repeated heading gets `-2`, `-3`… */
function slugger(): (text: string) => string {
  const seen = new Map<string, number>();
  return (text) => {
    const base =
      text
        .toLowerCase()
        .replace(/<[^>]+>/g, '')
        .replace(/&[a-z#0-9]+;/g, '')
        .replace(/[^a-z0-9 _-]/g, '')
        .trim()
        .replace(/[\s_]+/g, '-') || 'section';
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    return n === 1 ? base : `${base}-${n}`;
  };
}

/**
 * A link between the guide's files (`050-policies-and-approvals.md#walkthrough-…`), which works
 * where each file is read on its own (a clone, a repository browser), points into the one page
 * the service serves: `#walkthrough-…`. A link to a file without an anchor goes to the page's top.
 */
export const GUIDE_FILE_LINK = /^\d{3}-[a-z0-9-]+\.md(#[a-z0-9_-]+)?$/;
const inPage = (href: string): string => (GUIDE_FILE_LINK.test(href) ? (/#.+$/.exec(href)?.[0] ?? '#contents') : href);

/**
 * The operator guide as HTML: every heading gets an id and a link to itself, and a table of
 * contents of the second- and third-level headings follows the title.
 */
export function renderGuide(markdown: string): string {
  const slug = slugger();
  const toc: { depth: number; id: string; html: string }[] = [];
  const marked = new Marked({
    renderer: {
      heading(this: { parser: { parseInline(tokens: Tokens.Heading['tokens']): string } }, { tokens, depth }: Tokens.Heading) {
        const html = this.parser.parseInline(tokens);
        const id = slug(html);
        if (depth === 2 || depth === 3) toc.push({ depth, id, html });
        return `<h${depth} id="${id}">${html} <a class="anchor" href="#${id}" aria-label="Link to this section">#</a></h${depth}>\n`;
      },
    },
    walkTokens(token) {
      if (token.type === 'link') token.href = inPage(token.href);
    },
  });
  const body = marked.parse(markdown, { async: false });
  const link = (e: (typeof toc)[number]) => `<a href="#${e.id}">${e.html.replace(/<a [^>]*>|<\/a>/g, '')}</a>`;
  const sections: { entry: (typeof toc)[number]; children: (typeof toc)[number][] }[] = [];
  for (const e of toc) {
    if (e.depth === 2 || sections.length === 0) sections.push({ entry: e, children: [] });
    else sections[sections.length - 1]!.children.push(e);
  }
  const items = sections.map(
    (s) => `<li>${link(s.entry)}${s.children.length ? `<ol>${s.children.map((c) => `<li>${link(c)}</li>`).join('')}</ol>` : ''}</li>`,
  );
  const nav = `<nav class="toc" aria-label="Contents"><h2 id="contents">Contents</h2><ol>${items.join('')}</ol></nav>`;
  // The table of contents goes after the title and its introduction, before the first section.
  const firstSection = body.search(/<h2 /);
  return firstSection === -1 ? nav + body : body.slice(0, firstSection) + nav + body.slice(firstSection);
}
