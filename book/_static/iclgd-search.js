// Search results of the iclgd book: summaries without TeX source.
//
// Sphinx's search page shows, under each result, an excerpt of the page's text; the text of a
// math element is its TeX source (`\(C \to \infty\)`), which MathJax never sees there. Before an
// excerpt is cut, each math element of the fetched page is replaced by the text of the MathML
// that MathJax makes of it (`C→∞`), the book's macros included. Added to search.html only
// (book/_ext/iclgd_sphinx.py).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined" || !Search.htmlToText) return;
  const original = Search.htmlToText;
  // MathML as text: the tokens in order, sub- and superscripts marked with _ and ^ (w_⋆, ‖x‖^2)
  const mathText = (node) => {
    const parts = [...node.children].map(mathText);
    if (!parts.length) return node.textContent;
    const marks = { msub: ["", "_"], msup: ["", "^"], msubsup: ["", "_", "^"], mfrac: ["", "/"] };
    const mark = marks[node.localName] || [];
    return parts.map((part, i) => (mark[i] || "") + part).join("");
  };
  const asText = (tex) => {
    const source = tex.trim().replace(/^\\[([]|\\[)\]]$/g, "").replace(/^\$+|\$+$/g, "");
    try {
      const mml = MathJax.tex2mml(source, { display: false });
      return mathText(new DOMParser().parseFromString(mml, "application/xml").documentElement);
    } catch (error) {
      return source.replace(/\\([A-Za-z]+)/g, "$1");  // no MathJax: at least no backslashes
    }
  };
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(".math").forEach((el) => { el.textContent = asText(el.textContent); });
    return original(page.documentElement.outerHTML, anchor);
  };
});
