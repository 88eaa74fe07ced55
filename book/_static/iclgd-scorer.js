/* The book's search scorer (html_search_scorer in _config.yml; Sphinx's default Scorer, plus a
   score hook): a result from the API pages (book/api, book/api/*) ranks below every result from a
   chapter or another page, so that a search for "GD++" opens on the chapters that discuss it,
   with the functions that compute it after them. */
var Scorer = {
  score: (result) => {
    const [docname, , , , score] = result;
    return docname === "book/api" || docname.startsWith("book/api/") ? score - 1000 : score;
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
