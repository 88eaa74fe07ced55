#!/usr/bin/env bash
# Re-vendor MathJax 3 into book/_static/mathjax/ from the npm registry.
#
# The book serves MathJax from its own _static/ so that math renders with no network
# (the Sphinx default loads it from a CDN). The vendored copy is committed; run this
# script only to change the MathJax version:
#
#     bash scripts/vendor_mathjax.sh            # default version below
#     bash scripts/vendor_mathjax.sh 3.2.2
#
# What is kept (about 1.9 MB): es5/tex-mml-chtml.js (TeX input, CHTML output, menu),
# es5/output/chtml/fonts/woff-v2/ (the fonts), and es5/input/tex/extensions/ (TeX packages
# that tex-mml-chtml.js autoloads on first use, e.g. \boldsymbol, \cancel, mathtools),
# minus all-packages.js, which nothing loads.
set -euo pipefail
version="${1:-3.2.2}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$here/book/_static/mathjax"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "mathjax@$version" >/dev/null && tar xzf mathjax-*.tgz)
src="$tmp/package/es5"
rm -rf "$dest"
mkdir -p "$dest/output/chtml/fonts" "$dest/input/tex"
cp "$src/tex-mml-chtml.js" "$dest/"
cp -r "$src/output/chtml/fonts/woff-v2" "$dest/output/chtml/fonts/"
cp -r "$src/input/tex/extensions" "$dest/input/tex/"
rm -f "$dest/input/tex/extensions/all-packages.js"
cp "$tmp/package/LICENSE" "$dest/LICENSE"
echo "mathjax $version (npm package, es5 build), vendored by scripts/vendor_mathjax.sh" > "$dest/VERSION"
du -sh "$dest"
