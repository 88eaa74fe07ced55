// Hover previews of the iclgd book's cross-references (registered by html_js_files in _config.yml).
//
// Pointing at (or tabbing to) a link in a page's text to a theorem box, an equation, a figure, a
// claims-table or errata row, a section, an API entry or a citation shows a small box with what
// the link leads to: the theorem box whole, the figure with its caption, the row as "column:
// cell" pairs, a section's heading and first paragraphs, the reference of a citation. Escape, or
// moving away, hides it.
//
// Where the content comes from:
// * a target on the same page: a copy of the page's own node (its math already typeset);
// * a citation: the reference that sphinxcontrib-bibtex writes into the link's title;
// * a target on another page of the book: that page, read with fetch() (same origin, no network:
//   the pages are the book's own), cached per page, its math typeset in the box by the vendored
//   MathJax. From file:// most browsers refuse to read another file (Chromium unless started
//   with --allow-file-access-from-files, Firefox): there the read fails and no box is shown for
//   links to other pages; the link works as before. Same-page targets and citations preview
//   everywhere.
//
// The box is positioned absolutely over the page (nothing moves) and follows the theme's colours
// (light and dark mode). It is off for touch (a tap is a pointer event of type "touch", which is
// ignored; the media query `hover: none` is no test, headless Chromium matches it), at 720 px and
// narrower, and in print (book/_static/iclgd.css, the "hover previews" block). Checked by
// tests/test_book_html.py::test_hover_previews.
"use strict";
(() => {
  const OFF = "(max-width: 720px), print"; // and touch: pointer events of type "touch" are ignored
  const SHOW_DELAY = 250; // ms of hovering before the box opens
  const HIDE_DELAY = 250; // ms to move the pointer from the link into the box
  const BUDGET = 700; // characters of a section's text shown after its heading
  const pages = new Map(); // page URL -> Promise of its parsed document (or null)
  let box = null;
  let inner = null;
  let shown = null; // the link whose preview is open (or opening)
  let generation = 0;
  let showTimer = 0;
  let hideTimer = 0;
  let dismissed = null; // the link whose box Escape closed, until the pointer leaves it
  const pointer = { x: -1, y: -1 }; // where the pointer last entered a link (window coordinates)

  const off = () => window.matchMedia(OFF).matches;

  // The link's URL when it is a reference within the book to preview, else null.
  const target = (link) => {
    if (!link || !link.matches("a[href]") || link.closest(".iclgd-hover")) return null;
    if (!link.closest(".bd-article")) return null;
    if (link.matches(".headerlink, .reference.external, [download]")) return null;
    let url;
    try {
      url = new URL(link.href, location.href);
    } catch {
      return null;
    }
    if (url.protocol !== location.protocol || url.host !== location.host) return null;
    const samePage = url.pathname === location.pathname;
    if (samePage && !url.hash) return null;
    if (!samePage && !/(\.html|\/)$/.test(url.pathname)) return null;
    return url;
  };

  const load = (url) => {
    if (!pages.has(url)) {
      const page = fetch(url)
        .then((reply) => {
          if (!reply.ok && reply.status !== 0) throw new Error(`${reply.status}`);
          return reply.text();
        })
        .then((text) => new DOMParser().parseFromString(text, "text/html"))
        .catch(() => null); // e.g. file:// in a browser that does not allow it: no preview
      pages.set(url, page);
    }
    return pages.get(url);
  };

  // A copy of a node to show in the box: no ids (no duplicates in the page), no heading links,
  // scripts or form controls, every link and image URL absolute (the node may be another page's).
  const copy = (node, base) => {
    const clone = node.cloneNode(true);
    const all = [clone, ...clone.querySelectorAll("*")];
    for (const el of all) {
      el.removeAttribute("id");
      for (const attr of ["href", "src"]) {
        const value = el.getAttribute(attr);
        if (value && !value.startsWith("#") && !/^[a-z]+:/i.test(value)) {
          el.setAttribute(attr, new URL(value, base).href);
        } else if (value && value.startsWith("#") && base !== location.href.split("#")[0]) {
          el.setAttribute(attr, base + value);
        }
      }
    }
    clone.querySelectorAll("a.headerlink, script, button, input, .toggle-button").forEach((el) => {
      el.remove();
    });
    clone.querySelectorAll("img").forEach((img) => { img.loading = "eager"; });
    return clone;
  };

  const isHeading = (el) => el && /^H[1-6]$/.test(el.tagName);

  // What to show of a section: its heading, then its first blocks up to BUDGET characters (code
  // cells, a chapter's paper-scale run line and nested sections left out).
  const section = (el, base) => {
    const out = document.createElement("div");
    let chars = 0;
    for (const child of el.children) {
      if (child.tagName === "SECTION" || chars >= BUDGET) break;
      if (child.matches(".cell, .iclgd-paper-run, script, style")) continue; // code, run line
      if (!isHeading(child) && !child.textContent.trim() && !child.querySelector("img")) continue;
      out.appendChild(copy(child, base));
      if (!isHeading(child)) chars += child.textContent.length;
    }
    return out;
  };

  // A table row as "column: cell" pairs, under the heading of the table's section.
  const row = (tr, base) => {
    const out = document.createElement("div");
    const table = tr.closest("table");
    const place = tr.closest("section");
    const heading = place && [...place.children].find(isHeading);
    if (heading) {
      const title = document.createElement("p");
      title.className = "iclgd-hover-where";
      title.append(...copy(heading, base).childNodes);
      out.appendChild(title);
    }
    const names = table ? [...table.querySelectorAll("thead th")] : [];
    const list = document.createElement("dl");
    [...tr.children].forEach((cell, i) => {
      const dt = document.createElement("dt");
      dt.textContent = names[i] ? names[i].textContent.trim() : "";
      const dd = document.createElement("dd");
      dd.append(...copy(cell, base).childNodes);
      list.append(dt, dd);
    });
    out.appendChild(list);
    return out;
  };

  // The content to preview for the element with the link's id, or null.
  const excerpt = (el, base) => {
    if (!el) return null;
    // a label before what it names (<span id="label"></span><h2>...): the section or the element
    if (!el.textContent.trim() && !el.querySelector("img")) {
      const next = el.nextElementSibling;
      if (isHeading(next) && el.parentElement.tagName === "SECTION") el = el.parentElement;
      else if (next) el = next;
      else if (el.parentElement && el.parentElement.tagName === "SECTION") el = el.parentElement;
      else return null;
    }
    if (isHeading(el) && el.parentElement.tagName === "SECTION") el = el.parentElement;
    if (el.tagName === "TR") return row(el, base);
    if (el.tagName === "SECTION") return section(el, base);
    if (el.tagName === "DT") {  // an API entry: its signature and the first paragraph
      const out = document.createElement("dl");
      out.appendChild(copy(el, base));
      const dd = el.nextElementSibling;
      const first = dd && dd.tagName === "DD" && dd.querySelector(":scope > p");
      if (first) out.appendChild(document.createElement("dd")).appendChild(copy(first, base));
      return out;
    }
    if (el.tagName === "MAIN" || el.tagName === "ARTICLE" || el.tagName === "BODY") {
      const top = el.querySelector("section");
      return top ? section(top, base) : null;
    }
    return copy(el, base);
  };

  // The content for a link, or null: a citation's reference, or the target's excerpt.
  const content = async (link, url) => {
    const reference = link.dataset.iclgdTitle;
    if (reference) {
      const p = document.createElement("p");
      p.textContent = reference;
      return p;
    }
    const page = url.href.split("#")[0];
    const doc = url.pathname === location.pathname ? document : await load(page);
    if (!doc) return null;
    const id = decodeURIComponent(url.hash.slice(1));
    const el = id ? doc.getElementById(id) : doc.querySelector(".bd-article") || doc.body;
    return excerpt(el, page);
  };

  const make = () => {
    box = document.createElement("div");
    box.className = "iclgd-hover";
    box.id = "iclgd-hover";
    box.setAttribute("role", "tooltip");
    box.hidden = true;
    inner = box.appendChild(document.createElement("div"));
    inner.className = "iclgd-hover-body";
    box.style.top = "0px";
    box.style.left = "0px";
    box.addEventListener("mouseenter", () => clearTimeout(hideTimer));
    box.addEventListener("mouseleave", () => later(hide, HIDE_DELAY));
    document.body.appendChild(box);
  };

  // Below the link's line under the pointer (a link may wrap), or above it where the window has
  // no room below; inside the window sideways.
  const place = (link) => {
    const lines = [...link.getClientRects()];
    const rect = lines.find((r) => r.left <= pointer.x && pointer.x <= r.right &&
      r.top <= pointer.y && pointer.y <= r.bottom) || lines[0] || link.getBoundingClientRect();
    const width = box.offsetWidth;
    const height = box.offsetHeight;
    const gap = 6;
    const below = window.innerHeight - rect.bottom;
    const top = below < height + gap && rect.top > below ? rect.top - height - gap : rect.bottom + gap;
    const left = Math.max(8, Math.min(rect.left, document.documentElement.clientWidth - width - 8));
    box.style.top = `${top + window.scrollY}px`;
    box.style.left = `${left + window.scrollX}px`;
  };

  const later = (fn, ms) => {
    clearTimeout(hideTimer);
    hideTimer = setTimeout(fn, ms);
  };

  const hide = () => {
    clearTimeout(showTimer);
    clearTimeout(hideTimer);
    generation += 1;
    if (shown) {
      if (shown.dataset.iclgdDescribedby !== undefined) {
        const before = shown.dataset.iclgdDescribedby;
        if (before) shown.setAttribute("aria-describedby", before);
        else shown.removeAttribute("aria-describedby");
        delete shown.dataset.iclgdDescribedby;
      }
      shown = null;
    }
    if (box && !box.hidden) {
      box.hidden = true;
      delete box.dataset.ready;
      if (window.MathJax && MathJax.typesetClear) MathJax.typesetClear([inner]);
      inner.replaceChildren();
    }
  };

  const show = async (link) => {
    const url = target(link);
    if (!url || off()) return;
    if (shown === link && box && !box.hidden) return;
    hide();
    const mine = generation;
    shown = link;
    const body = await content(link, url);
    if (mine !== generation || !body) return;
    if (!box) make();
    inner.replaceChildren(body);
    box.hidden = false;
    place(link);
    const before = link.getAttribute("aria-describedby") || "";
    link.dataset.iclgdDescribedby = before;
    link.setAttribute("aria-describedby", [before, box.id].filter(Boolean).join(" "));
    const MathJax = window.MathJax;
    if (MathJax && MathJax.typesetPromise && inner.querySelector(".math")) {
      try {
        if (MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
        if (mine !== generation) return;
        await MathJax.typesetPromise([inner]);
      } catch {
        // the text stays readable as TeX
      }
      if (mine === generation) place(link);
    }
    if (mine === generation) box.dataset.ready = "true"; // shown, its math typeset
  };

  const linkOf = (event) => {
    const link = event.target instanceof Element ? event.target.closest("a[href]") : null;
    return target(link) ? link : null;
  };

  // A citation's reference moves from its title (the browser's own tooltip) to the box.
  const adopt = (link) => {
    const title = link.getAttribute("title");
    if (title && link.closest(".bibtex-citation, .cite")) {
      link.dataset.iclgdTitle = title;
      link.removeAttribute("title");
    }
  };

  document.addEventListener("pointerover", (event) => {
    if (event.pointerType === "touch" || off()) return;
    const link = linkOf(event);
    if (!link) return;
    adopt(link);
    pointer.x = event.clientX;
    pointer.y = event.clientY;
    clearTimeout(hideTimer);
    if (shown === link || dismissed === link) return;
    clearTimeout(showTimer);
    showTimer = setTimeout(() => show(link), SHOW_DELAY);
  });
  document.addEventListener("pointerout", (event) => {
    const link = linkOf(event);
    if (!link || (event.relatedTarget instanceof Node && link.contains(event.relatedTarget))) {
      return;
    }
    clearTimeout(showTimer);
    if (dismissed === link) dismissed = null;
    if (shown === link) later(hide, HIDE_DELAY);
  });
  document.addEventListener("focusin", (event) => {
    const link = linkOf(event);
    if (!link || off() || !link.matches(":focus-visible")) return;
    adopt(link);
    pointer.x = pointer.y = -1; // below the link's first line
    show(link);
  });
  document.addEventListener("focusout", (event) => {
    const link = linkOf(event);
    if (link && shown === link && !(box && box.contains(event.relatedTarget))) hide();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || !shown) return;
    dismissed = shown;
    hide();
  });
  window.addEventListener("resize", hide);
  window.addEventListener("beforeprint", hide);
})();
