// Just enough Markdown for the documentation tests: headings and their GitHub anchors, links,
// and fenced code blocks, each with the line it starts on. Text inside fences and inline code is
// not searched for headings or links.

/** A fenced code block: its info string (`ts ignore`, `sh`, `html`), its text and its first line. */
export interface Block {
  info: string;
  code: string;
  line: number;
}

/** A link: its target as written and the line it is on. */
export interface Link {
  target: string;
  line: number;
}

/** What the tests need of one Markdown file. */
export interface Markdown {
  anchors: Set<string>;
  links: Link[];
  blocks: Block[];
  /** Level-2 sections by heading text, each with its text up to the next level-2 heading. */
  sections: Map<string, string>;
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
export function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, "").replace(/ /g, "-");
}

/** Reads a Markdown text into its anchors, links, code blocks and level-2 sections. */
export function parseMarkdown(text: string): Markdown {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const links: Link[] = [];
  const blocks: Block[] = [];
  const sections = new Map<string, string>();
  const lines = text.split("\n");
  let fence: Block | undefined;
  let indent = "";
  let section: { name: string; lines: string[] } | undefined;
  for (const [i, line] of lines.entries()) {
    if (line.startsWith("## ")) {
      if (section) sections.set(section.name, section.lines.join("\n"));
      section = { name: line.slice(3).trim(), lines: [] };
    }
    section?.lines.push(line);
    const fenceMark = /^(\s*)```(.*)$/.exec(line);
    if (fence) {
      if (fenceMark && fenceMark[2]!.trim() === "") {
        blocks.push(fence);
        fence = undefined;
      } else fence.code += (line.startsWith(indent) ? line.slice(indent.length) : line) + "\n";
      continue;
    }
    if (fenceMark) {
      fence = { info: fenceMark[2]!.trim(), code: "", line: i + 1 };
      indent = fenceMark[1]!;
      continue;
    }
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (heading) {
      const base = slug(heading[1]!.replace(/`/g, ""));
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.replace(/`[^`]*`/g, "").matchAll(/\]\(([^)\s]+)\)/g)) {
      links.push({ target: m[1]!, line: i + 1 });
    }
  }
  if (section) sections.set(section.name, section.lines.join("\n"));
  for (const m of text.matchAll(/<a (?:name|id)="([^"]+)"/g)) anchors.add(m[1]!);
  return { anchors, links, blocks, sections };
}
