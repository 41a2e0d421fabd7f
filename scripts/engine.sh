#!/usr/bin/env bash
# The container engine the image scripts and tests use: docker or podman, whichever can run here.
#
#   scripts/engine.sh status     # which engine would be used, or one line saying why none can run (exit 2)
#   scripts/engine.sh start      # start dockerd if docker is installed and no daemon answers (machines without
#                                # systemd, like CI's): dockerd --iptables=false --bridge=none, host networking
#   scripts/engine.sh stop       # stop the dockerd that `start` started (and only that one)
#
# Sourced by scripts/build-images.sh: engine_detect sets ENGINE (docker|podman), ENGINE_CMD (the command, as an
# array), ENGINE_DESC, or ENGINE_ERROR; engine_build runs the engine's BuildKit-capable build with --network host.
# CCDA_ENGINE=docker|podman picks one; CCDA_DOCKERD_DIR (default /tmp/ccda-dockerd) holds the started daemon's
# pid file and log.

DOCKERD_DIR="${CCDA_DOCKERD_DIR:-/tmp/ccda-dockerd}"

_docker_clients() { type -ap docker 2>/dev/null | awk '!seen[$0]++'; }

# _docker_build_mode CLI: "buildx" (a CLI with the buildx plugin), "embedded" (a CLI older than 23, which drives
# the daemon's built-in BuildKit with DOCKER_BUILDKIT=1), or nothing (a newer CLI without buildx can't)
_docker_build_mode() {
  if "$1" buildx version >/dev/null 2>&1; then echo buildx; return; fi
  local v
  v=$("$1" version --format '{{.Client.Version}}' 2>/dev/null || "$1" --version | sed -n 's/^Docker version \([0-9]*\).*/\1/p')
  [ "${v%%.*}" -lt 23 ] 2>/dev/null && echo embedded
  return 0
}

_detect_docker() {
  local c mode found=
  for c in $(_docker_clients); do
    found=1
    "$c" info >/dev/null 2>&1 || { ENGINE_ERROR="docker: no daemon answers at ${DOCKER_HOST:-/var/run/docker.sock} (start one: scripts/engine.sh start)"; return 1; }
    mode=$(_docker_build_mode "$c")
    if [ -n "$mode" ]; then
      ENGINE=docker ENGINE_CMD=("$c") DOCKER_MODE=$mode
      ENGINE_DESC="docker ($c, $("$c" version --format 'server {{.Server.Version}}' 2>/dev/null), BuildKit: $mode)"
      return 0
    fi
  done
  if [ -n "$found" ]; then
    ENGINE_ERROR="docker: no docker CLI here can use BuildKit (install the buildx plugin, or Debian's docker.io)"
  else
    ENGINE_ERROR="docker: not installed (apt-get install docker.io)"
  fi
  return 1
}

_detect_podman() {
  command -v podman >/dev/null || { ENGINE_ERROR="${ENGINE_ERROR:+$ENGINE_ERROR; }podman: not installed (apt-get install podman runc)"; return 1; }
  local cmd=(podman)
  # hybrid cgroup v1 machines: crun refuses them, systemd is absent
  command -v runc >/dev/null && cmd+=(--runtime runc)
  [ -d /run/systemd/system ] || cmd+=(--cgroup-manager cgroupfs)
  local err
  if ! err=$("${cmd[@]}" info 2>&1 >/dev/null); then
    ENGINE_ERROR="${ENGINE_ERROR:+$ENGINE_ERROR; }podman: cannot run here ($(echo "$err" | tail -n1))"
    return 1
  fi
  ENGINE=podman ENGINE_CMD=("${cmd[@]}") ENGINE_DESC="podman ($("${cmd[@]}" version --format '{{.Client.Version}}'))"
}

engine_detect() {
  ENGINE= ENGINE_CMD=() ENGINE_DESC= ENGINE_ERROR=
  case "${CCDA_ENGINE:-}" in
    docker) _detect_docker ;;
    podman) _detect_podman ;;
    "") _detect_docker || _detect_podman ;;
    *) ENGINE_ERROR="CCDA_ENGINE=$CCDA_ENGINE: use docker or podman"; return 1 ;;
  esac || { ENGINE_ERROR="no container engine can run here: $ENGINE_ERROR"; return 1; }
}

# engine_build ARGS: replaces the calling shell with the engine's build (run it in a subshell or in the
# background: `engine_build ... &`, so that its pid is the build's own and a kill reaches it)
engine_build() {
  if [ "$ENGINE" = podman ]; then
    exec "${ENGINE_CMD[@]}" build --network host "$@"
  elif [ "$DOCKER_MODE" = embedded ]; then
    DOCKER_BUILDKIT=1 exec "${ENGINE_CMD[@]}" build --network host --progress plain "$@"
  else
    exec "${ENGINE_CMD[@]}" build --network host --progress plain --load "$@"
  fi
}

engine_start() {
  if _detect_docker 2>/dev/null || ! command -v dockerd >/dev/null; then
    return 0  # a daemon answers already, or docker is not what this machine has
  fi
  [ "$(id -u)" = 0 ] || { echo "engine: dockerd needs root to start" >&2; return 2; }
  mkdir -p "$DOCKERD_DIR"
  # no iptables and no bridge: this machine's kernel/sandbox allows neither; containers use --network host
  setsid dockerd --iptables=false --ip6tables=false --bridge=none \
    --pidfile "$DOCKERD_DIR/dockerd.pid" > "$DOCKERD_DIR/dockerd.log" 2>&1 < /dev/null &
  local i
  for i in $(seq 60); do
    _detect_docker >/dev/null 2>&1 && { echo "engine: started dockerd (log: $DOCKERD_DIR/dockerd.log)" >&2; return 0; }
    sleep 1
  done
  echo "engine: dockerd did not come up: $(tail -n 3 "$DOCKERD_DIR/dockerd.log" | tr '\n' ' ')" >&2
  return 2
}

engine_stop() {
  local pid
  [ -f "$DOCKERD_DIR/dockerd.pid" ] || return 0
  pid=$(cat "$DOCKERD_DIR/dockerd.pid")
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] || { rm -f "$DOCKERD_DIR/dockerd.pid"; return 0; }
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  echo "engine: stopped dockerd ($pid)" >&2
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  case "${1:-status}" in
    status) engine_detect && echo "$ENGINE_DESC" || { echo "$ENGINE_ERROR" >&2; exit 2; } ;;
    start) engine_start ;;
    stop) engine_stop ;;
    *) echo "usage: scripts/engine.sh status|start|stop" >&2; exit 2 ;;
  esac
fi
