#!/usr/bin/env bash
# Builds the manual (docs/, mdBook) into target/book, writes the API
# reference page (api.html, rendered from openapi/openapi.json) and the
# document itself beside it, and fails on any broken link: of the built
# pages (files and anchors, checked offline by lychee) and of README.md,
# which is not part of the book. Also holds the README to at most 200
# lines: it is the front door, and the manual holds the rest.
#
# Needs no network. The tools, as scripts/test.sh installs them:
#   FLOE_MDBOOK   mdBook 0.5.4               (default: mdbook on PATH)
#   FLOE_LYCHEE   lychee 0.24.2              (default: lychee on PATH)
#   FLOE_REDOCLY  @redocly/cli, tests/docs   (default: its npm install there)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

mdbook=${FLOE_MDBOOK:-mdbook}
lychee=${FLOE_LYCHEE:-lychee}
redocly=${FLOE_REDOCLY:-$root/tests/docs/node_modules/.bin/redocly}
# Where docs/book.toml builds to (build-dir = "../target/book").
book=$root/target/book

# The README: short, and its links resolve.
readme_lines=$(wc -l < README.md)
if [ "$readme_lines" -gt 200 ]; then
  echo "README.md has $readme_lines lines; at most 200: move the rest into docs/" >&2
  exit 1
fi
# Relative links only (a link with a scheme is not a file). An anchor into
# a Markdown file must name one of its headings, as GitHub makes their ids.
# Code blocks are skipped: a `[x](y)` in a shell example is not a link.
python3 - README.md <<'EOF'
import os, re, sys

def without_code(text):
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)

def anchors(markdown):
    """GitHub's ids of a Markdown file's headings."""
    headings = re.findall(r"^#+ +(.+?) *$", without_code(markdown), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}

readme = sys.argv[1]
broken = []
for target in re.findall(r"\]\(([^)\s]+)\)", without_code(open(readme).read())):
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        continue
    path, _, anchor = target.partition("#")
    path = os.path.join(os.path.dirname(readme), path) if path else readme
    if not os.path.exists(path):
        broken.append(target)
    elif anchor and path.endswith(".md") and anchor not in anchors(open(path).read()):
        broken.append(target)
if broken:
    sys.exit(f"{readme}: broken links: {', '.join(broken)}")
EOF

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Runs a tool quietly, and shows what it said only when it fails.
quiet() {
  if ! "$@" > "$log" 2>&1; then
    cat "$log" >&2
    echo "failed: $1" >&2
    exit 1
  fi
}

rm -rf "$book"
quiet "$mdbook" build docs
# mdBook copies every file of its source folder that is not a page.
rm -f "$book/book.toml"

# The API reference: Redoc's page with its scripts inlined, so it loads
# nothing from a CDN; the one image it still names there, the "powered by"
# logo, becomes an empty inline SVG. No usage report is sent either.
export REDOCLY_TELEMETRY=off
quiet "$redocly" build-docs openapi/openapi.json --inlineBundle \
  -o "$book/api.html"
sed -i -E 's#https://cdn\.redoc\.ly/redoc/logo-mini(-full)?\.svg#data:image/svg+xml,%3Csvg%20xmlns=%22http://www.w3.org/2000/svg%22/%3E#g' "$book/api.html"
if grep -q 'cdn\.redoc\.ly' "$book/api.html"; then
  echo "$book/api.html still loads something from cdn.redoc.ly" >&2
  exit 1
fi
cp openapi/openapi.json "$book/openapi.json"

# Every link of the built pages: files and #anchors, offline (web links are
# left out, not fetched). --root-dir resolves root-relative links: mdBook's
# 404.html has <base href="/">, so its links start at the book's root.
# api.html is checked as a target (the manual links to it) but its own
# links are not: its menu links are Redoc's client-side routes
# (href="/deployments"), which name no file.
mapfile -t inputs < <(find "$book" -name '*.html' ! -path "$book/api.html" | sort)
quiet "$lychee" --offline --include-fragments --no-progress \
  --root-dir "$book" "${inputs[@]}"
# lychee's summary line: "🔍 1723 Total ... 🔗 665 Unique ✅ 1708 OK ...".
links=$(grep -oE '[0-9]+ Total' "$log" | grep -oE '[0-9]+' || echo "?")
echo "docs: ${#inputs[@]} HTML pages in $book, $links links checked, none broken; README.md: $readme_lines lines"
