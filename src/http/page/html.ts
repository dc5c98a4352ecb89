/**
 * HTML built by a tagged template that escapes every interpolated value unless it is already
 * markup made here: job names, errors and reasons come from users, so escaping is the default and
 * raw text can only enter through `html` itself.
 */

export class Markup {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export type Fragment = Markup | string | number | null | undefined | false | readonly Fragment[];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text safe inside an element or a quoted attribute. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function render(fragment: Fragment): string {
  if (fragment === null || fragment === undefined || fragment === false) return '';
  if (fragment instanceof Markup) return fragment.value;
  if (Array.isArray(fragment)) return fragment.map(render).join('');
  return escapeHtml(String(fragment));
}

export function html(strings: TemplateStringsArray, ...values: Fragment[]): Markup {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new Markup(out);
}
