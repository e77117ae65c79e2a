#!/usr/bin/env bash
# Renders a kscope HTML page (kscope::render_html) or SVG to a PNG with headless
# chromium, to look at a report without a browser or to put a picture in the docs.
#
# Usage: docs/render_html.sh page.html [out.png] [width] [height]
#   defaults: out.png = page.png next to the input, 1200 x 900 pixels.
# Needs chromium (or chromium-browser / google-chrome; set CHROMIUM to choose).
# The page has no JavaScript and no external resources, so no network is needed.
set -euo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: $0 page.html [out.png] [width] [height]" >&2
  exit 2
fi
input="$1"
if [[ ! -f "$input" ]]; then echo "$0: no such file: $input" >&2; exit 2; fi
output="${2:-${input%.*}.png}"
width="${3:-1200}"
height="${4:-900}"
browser="${CHROMIUM:-}"
if [[ -z "$browser" ]]; then
  for candidate in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$candidate" >/dev/null 2>&1; then browser="$candidate"; break; fi
  done
fi
if [[ -z "$browser" ]]; then echo "$0: chromium not found (set CHROMIUM)" >&2; exit 3; fi
input_abs="$(cd "$(dirname "$input")" && pwd)/$(basename "$input")"
output_abs="$(cd "$(dirname "$output")" && pwd)/$(basename "$output")"
# A private profile directory: headless chromium must not touch the user's profile.
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
  --screenshot="$output_abs" --window-size="$width,$height" "file://$input_abs" >/dev/null 2>&1
if [[ ! -s "$output_abs" ]]; then echo "$0: chromium wrote no screenshot" >&2; exit 1; fi
echo "$output_abs"
