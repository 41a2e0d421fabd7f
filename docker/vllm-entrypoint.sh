#!/bin/sh
# Start vLLM's OpenAI-compatible server with context-cda's model conventions (see docker/Dockerfile.vllm).
#   MODEL              /models/<name> (a folder on the model-cache PVC), s3://bucket/prefix, or a hub id
#   SERVED_MODEL_NAME  the name clients send as "model" (default: the last path component of MODEL)
#   CCDA_SERVE_PORT    listen port (default 8000); not VLLM_PORT, which vLLM reserves for its own use
#   VLLM_API_KEY       required: vLLM then answers /v1 only with `Authorization: Bearer <key>` (what --api-key
#                      does, read from the environment so the key is not on the command line, where ps shows it);
#                      in Kubernetes it comes from Secret ccda-vllm-api-key, the key the pipeline's client sends.
#                      CCDA_VLLM_NO_API_KEY=1 serves without a key (a private test machine only).
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

exec vllm serve "$MODEL" \
  --host 0.0.0.0 \
  --port "${CCDA_SERVE_PORT:-8000}" \
  --served-model-name "$served_name" \
  "$@"
