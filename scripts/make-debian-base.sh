#!/usr/bin/env bash
# Make a Python base image from Debian packages, for sites (and machines) that cannot pull the official
# `python:3.11.13-slim-bookworm`: debootstrap a minimal Debian with its python3 (3.11 on bookworm), import the
# folder as an image and tag it. The images' Dockerfiles take it as `--build-arg PYTHON_IMAGE=<tag>`
# (scripts/build-images.sh does that when the default base can't be pulled; see docs/kubernetes.md).
#
#   scripts/make-debian-base.sh                    # -> context-cda-base:bookworm-python3 (prints the tag)
#   DEBIAN_MIRROR=http://mirror.example/debian scripts/make-debian-base.sh
#
# Environment: CCDA_ENGINE (docker or podman; default: whichever is on PATH), DEBIAN_SUITE (bookworm),
# DEBIAN_MIRROR (what apt uses here, else deb.debian.org), BASE_TAG (context-cda-base:<suite>-python3),
# FORCE=1 (rebuild although the tag exists). Needs root and `debootstrap` (apt-get install debootstrap).
# Like python:*-slim it holds python3 with venv and pip, CA certificates, no compilers, no apt lists or caches.
set -euo pipefail

die() { echo "make-debian-base: $*" >&2; exit 2; }

SUITE="${DEBIAN_SUITE:-bookworm}"
TAG="${BASE_TAG:-context-cda-base:${SUITE}-python3}"
ENGINE="${CCDA_ENGINE:-$(command -v docker >/dev/null && echo docker || echo podman)}"
command -v "$ENGINE" >/dev/null || die "no container engine: install docker.io (or podman), or set CCDA_ENGINE"

if [ "${FORCE:-0}" != 1 ] && "$ENGINE" image inspect "$TAG" >/dev/null 2>&1; then
  echo "$TAG"
  exit 0
fi
[ "$(id -u)" = 0 ] || die "debootstrap needs root (run as root, or pull an official python base instead)"
command -v debootstrap >/dev/null || die "debootstrap is not installed: apt-get install debootstrap"

if [ -z "${DEBIAN_MIRROR:-}" ]; then  # the mirror this machine's apt uses, so a proxy or local mirror keeps working
  DEBIAN_MIRROR=$(grep -rhoE '^(URIs:|deb) +\S+' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
                  | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)
  DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/ccda-debian-base.XXXXXX")
trap 'rm -rf "$root"' EXIT
echo "make-debian-base: debootstrap $SUITE from $DEBIAN_MIRROR (a few minutes)" >&2
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
  "$SUITE" "$root" "$DEBIAN_MIRROR" > "$root.log" 2>&1 \
  || { tail -n 20 "$root.log" >&2; die "debootstrap failed (log above; DEBIAN_MIRROR=$DEBIAN_MIRROR)"; }
rm -f "$root.log"
# what python:*-slim leaves out as well: package lists, caches, docs
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*
"$root"/usr/bin/python3 -c 'import venv, ensurepip, ssl' || die "the new base has no working python3 venv"
for cc in gcc cc c++ g++ clang; do
  [ ! -e "$root/usr/bin/$cc" ] || die "the base image would hold a compiler ($cc)"
done

tar -C "$root" -c . | "$ENGINE" import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["python3"]' \
  --message "Debian $SUITE minbase + python3 (scripts/make-debian-base.sh)" - "$TAG" >/dev/null
echo "make-debian-base: made $TAG" >&2
echo "$TAG"
