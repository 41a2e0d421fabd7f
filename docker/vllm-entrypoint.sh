#!/bin/sh
# Start vLLM's OpenAI-compatible server with context-cda's model conventions (see docker/Dockerfile.vllm).
#   MODEL              /models/<name> (a folder on the model-cache PVC), s3://bucket/prefix, or a hub id
#   SERVED_MODEL_NAME  the name clients send as "model" (default: the last path component of MODEL)
#   CCDA_SERVE_PORT    listen port (default 8000); not VLLM_PORT, which vLLM reserves for its own use
#   VLLM_API_KEY       required: vLLM then answers /v1 only with `Authorization: Bearer <key>` (what --api-key
#                      does, read from the environment so the key is not on the command line, where ps shows it);
#                      in Kubernetes it comes from Secret ccda-vllm-api-key, the key the pipeline's client sends.
#                      CCDA_VLLM_NO_API_KEY=1 serves without a key (a private test machine only).
#   CCDA_VLLM_TENSOR_PARALLEL    vLLM's --tensor-parallel-size: auto (default) = the pod's GPUs / the pipeline
#                                stages (NVIDIA_VISIBLE_DEVICES, else nvidia-smi), or a number
#   CCDA_VLLM_PIPELINE_PARALLEL  vLLM's --pipeline-parallel-size (default 1); both are passed only when above 1,
#                                and not when the arguments already hold them
# Any arguments are passed on to `vllm serve` (e.g. --max-model-len 4096 --gpu-memory-utilization 0.9).
set -eu

: "${MODEL:?set MODEL to a folder under /models, an s3:// URI or a hub id}"
served_name="${SERVED_MODEL_NAME:-$(basename "$MODEL")}"

if [ -z "${VLLM_API_KEY:-}" ] && [ "${CCDA_VLLM_NO_API_KEY:-0}" != "1" ]; then
  echo "ccda-vllm-serve: set VLLM_API_KEY (Secret ccda-vllm-api-key) so that only clients with the key are served" \
    "(CCDA_VLLM_NO_API_KEY=1 serves without one, on a private test machine only)" >&2
  exit 2
fi

case "$MODEL" in
  s3://*) set -- --load-format runai_streamer "$@" ;;
  /*)
    if [ ! -d "$MODEL" ]; then
      echo "ccda-vllm-serve: model folder $MODEL not found on the volume; copy the model there first" >&2
      exit 2
    fi
    ;;
esac

gpus() {
  case "${NVIDIA_VISIBLE_DEVICES:-}" in
    "" | all | void | none)
      if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true; else echo 0; fi ;;
    *) echo "$NVIDIA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c . ;;
  esac
}
number() {  # $1 name, $2 value: a whole number >= 1, or exit 2 naming the variable
  case "$2" in
    "" | *[!0-9]* | 0*) echo "ccda-vllm-serve: $1=$2: expected a whole number >= 1" >&2; exit 2 ;;
  esac
}
case " $* " in
  *" --tensor-parallel-size"* | *" -tp "* | *" --pipeline-parallel-size"* | *" -pp "*) ;;  # given: as given
  *)
    pp="${CCDA_VLLM_PIPELINE_PARALLEL:-1}"
    number CCDA_VLLM_PIPELINE_PARALLEL "$pp"
    tp="${CCDA_VLLM_TENSOR_PARALLEL:-auto}"
    n=$(gpus)
    if [ "$tp" = auto ]; then
      tp=$((n / pp))
      [ "$tp" -ge 1 ] || tp=1
    fi
    number CCDA_VLLM_TENSOR_PARALLEL "$tp"
    if [ "$n" -gt 0 ] && [ $((tp * pp)) -gt "$n" ]; then
      echo "ccda-vllm-serve: $tp x $pp GPUs asked (CCDA_VLLM_TENSOR_PARALLEL x CCDA_VLLM_PIPELINE_PARALLEL), the pod" \
        "has $n: raise nvidia.com/gpu in the Deployment or lower them" >&2
      exit 2
    fi
    [ "$pp" -gt 1 ] && set -- --pipeline-parallel-size "$pp" "$@"
    [ "$tp" -gt 1 ] && set -- --tensor-parallel-size "$tp" "$@"
    ;;
esac

exec vllm serve "$MODEL" \
  --host 0.0.0.0 \
  --port "${CCDA_SERVE_PORT:-8000}" \
  --served-model-name "$served_name" \
  "$@"
