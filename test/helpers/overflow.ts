/**
 * What overflows a page, measured in the page: the document wider than the (layout) viewport, an element
 * whose content is wider than its own box (a header cut at a table's edge, a badge spilling out of
 * its tile, text cut by an ellipsis), an element outside its nearest scrolling or clipping
 * container. A box that deliberately scrolls (overflow-x auto or scroll: the tables' wrappers on a
 * phone) may be wider inside than outside; with `scroll: 'none'` (a laptop) not even those may.
 * Each offender comes with a selector path, its widths and the start of its text, so that a failure
 * says what overflowed.
 */
import type { Page } from 'playwright-core';

export interface OverflowOptions {
  /** 'wrappers' (default): overflow-x auto/scroll boxes may scroll; 'none': nothing may scroll sideways. */
  scroll?: 'wrappers' | 'none';
}

// In the page, as a string: the type-check has no DOM library. Returns the offenders' descriptions.
const CHECK = `((scrollAllowed) => {
  const out = [];
  const doc = document.documentElement;
  // The layout viewport: on a phone innerWidth grows to a page that is too wide (the page is zoomed out to fit), clientWidth does not.
  const viewport = doc.clientWidth;
  if (doc.scrollWidth > viewport) out.push({ el: null, text: 'document: ' + doc.scrollWidth + 'px wide in a ' + viewport + 'px viewport (it scrolls sideways)' });
  const styles = new Map();
  const style = (el) => { let s = styles.get(el); if (!s) { s = getComputedStyle(el); styles.set(el, s); } return s; };
  const scrolls = (el) => /auto|scroll/.test(style(el).overflowX);
  // A box its descendants cannot be seen outside of: overflow other than visible, or paint containment (content-visibility: auto).
  const clips = (el) => style(el).overflowX !== 'visible' || style(el).contentVisibility === 'auto' || /paint|strict|content/.test(style(el).contain);
  const path = (el) => {
    const parts = [];
    for (let e = el; e && e !== doc; e = e.parentElement) {
      let part = e.tagName.toLowerCase();
      const data = [...e.attributes].find((a) => a.name.startsWith('data-'));
      if (e.id) { parts.unshift(part + '#' + e.id); break; }
      if (data) part += '[' + data.name + (data.value ? '="' + data.value + '"' : '') + ']';
      else if (e.classList.length > 0) part += '.' + [...e.classList].join('.');
      if (!data && e.parentElement) {
        const same = [...e.parentElement.children].filter((c) => c.tagName === e.tagName);
        if (same.length > 1) part += ':nth-of-type(' + (same.indexOf(e) + 1) + ')';
      }
      parts.unshift(part);
      if (data && parts.length > 1) break;
    }
    return parts.join(' > ');
  };
  const snippet = (el) => JSON.stringify((el.textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 60));
  const px = (n) => Math.round(n) + 'px';
  const all = [...document.body.querySelectorAll('*')];
  all.unshift(document.body);
  for (const el of all) {
    const s = style(el);
    if (s.display === 'none' || el.tagName === 'SCRIPT' || el.tagName === 'STYLE') continue;
    const rect = el.getBoundingClientRect();
    if (rect.width === 0 && rect.height === 0) continue;
    // The content wider than the element's own box.
    if (el.scrollWidth > el.clientWidth + 1 && !(scrollAllowed && scrolls(el))) {
      let widest = null;
      for (const d of el.querySelectorAll('*')) { const r = d.getBoundingClientRect(); if (r.width > 0 && (!widest || r.right > widest.right)) widest = { el: d, right: r.right }; }
      const cut = s.textOverflow === 'ellipsis' ? ', its text cut by an ellipsis' : '';
      const why = scrolls(el) ? ' (it scrolls sideways)' : cut;
      out.push({ el, text: path(el) + ': content ' + el.scrollWidth + 'px wide in a ' + el.clientWidth + 'px box' + why + ', text ' + snippet(el) + (widest ? '; sticking out furthest: ' + path(widest.el) + ' ' + snippet(widest.el) : '') });
    }
    // The element inside its nearest scrolling or clipping container (the viewport if none).
    let box = null;
    for (let a = el.parentElement; a && a !== doc; a = a.parentElement) if (clips(a)) { box = a; break; }
    let left = 0, right = viewport, name = 'the viewport';
    if (box) {
      const b = box.getBoundingClientRect();
      left = b.left + box.clientLeft - (scrolls(box) ? box.scrollLeft : 0);
      right = left + (scrolls(box) ? box.scrollWidth : box.clientWidth);
      name = path(box);
    }
    if (rect.left < left - 1 || rect.right > right + 1) {
      out.push({ el, text: path(el) + ': spans x ' + px(rect.left) + '..' + px(rect.right) + ' (' + px(rect.width) + '), outside ' + name + ' at ' + px(left) + '..' + px(right) + ', text ' + snippet(el) });
    }
  }
  // The innermost offenders: an ancestor of another offender is there because of it.
  const els = out.map((o) => o.el).filter((e) => e);
  return out.filter((o) => !o.el || !els.some((e) => e !== o.el && o.el.contains(e))).map((o) => o.text);
})`;

/** The offenders on the page as it is laid out now: [] when nothing overflows. */
export async function overflowOffenders(page: Page, options: OverflowOptions = {}): Promise<string[]> {
  return page.evaluate<string[]>(`${CHECK}(${options.scroll !== 'none'})`);
}

/** Throws, listing the offenders (at most 25), if anything overflows. */
export async function expectNoOverflow(page: Page, where: string, options: OverflowOptions = {}): Promise<void> {
  const offenders = await overflowOffenders(page, options);
  if (offenders.length === 0) return;
  const width = await page.evaluate<number>('document.documentElement.clientWidth');
  const shown = offenders.slice(0, 25).map((o) => `  - ${o}`).join('\n');
  const more = offenders.length > 25 ? `\n  … and ${offenders.length - 25} more` : '';
  throw new Error(`${where} at ${width}px: ${offenders.length} element(s) overflow\n${shown}${more}`);
}
