/* The book's search scorer (html_search_scorer in _config.yml; Sphinx's default Scorer, plus a
   score hook): a result from the API pages (book/api, book/api/*) ranks below every result from a
   chapter or another page, so that a search for "GD++" opens on the chapters that discuss it,
   with the functions that compute it after them. Equal scores go in the book's order (Part I
   before Part II before Part III): "Theorem 1" matches the index entries "Theorem 1 (Xie)" and
   "Theorem 1 (Ahn)" equally (Sphinx scores an index entry by the share of it the query covers),
   and the fraction added here only breaks such ties. */
var Scorer = {
  score: (result) => {
    const [docname, , , , score] = result;
    if (docname === "book/api" || docname.startsWith("book/api/")) return score - 1000;
    const part = docname.match(/^book\/part([123])\//);
    return score + (part ? (4 - Number(part[1])) / 10 : 0.35);  // shared chapters: first
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
