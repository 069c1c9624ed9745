#!/usr/bin/env bash
# The wheels an offline GPU machine needs beyond its own PyTorch image, into wheels/ (ignored by
# git), for scripts/gpu_env.sh to install there:
#   scripts/gpu_wheels.sh [PYTHON_VERSION]      (default 3.12, the GPU image's Python)
#
# bitsandbytes and transformers in the ranges requirements.txt pins, gradio with what it imports
# that such an image lacks, plotly, gguf and spaces. Two are slimmed to fit a 64 MiB working
# tree: bitsandbytes keeps its CPU library and those for CUDA 13 (the image's torch is a cu130
# build), gradio drops its built front end (templates/), which only a launched page serves.
# Versions are those this project's CI installs; the image's own numpy, torch, httpx, jinja2,
# huggingface_hub and tokenizers are used as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
python_version="${1:-3.12}"
rm -rf wheels && mkdir -p wheels
download() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
        -d wheels "$@" 2>&1 | grep -v "^WARNING: Location" || true
}
download "bitsandbytes==0.50.0" "transformers>=5.24,<5.25" "gguf==0.19.0" "plotly==7.1.0" \
    "narwhals==2.29.0" "gradio==6.31.0" "gradio_client==2.7.2" "hf-gradio==0.4.1" \
    "spaces==0.51.3" "fastapi==0.165.0" "starlette==1.10.0" "uvicorn==0.55.0" \
    "pydantic==2.13.4" "pydantic_core==2.46.4" "annotated-types==0.7.0" \
    "typing-inspection==0.4.2" "annotated-doc==0.0.7" "opentelemetry-api==1.45.2" \
    "safehttpx==0.1.7" "groovy==0.1.2" "orjson==3.11.5" "brotli==1.2.1" "pydub==0.25.1" \
    "python-multipart==0.0.34" "pytz==2026.6" "semantic-version==2.10.0" "tomlkit==0.14.0"

slim() {  # slim WHEEL GLOB...: drop the files matching any GLOB, and repack with a fresh RECORD
    local wheel="$1" work
    shift
    work="$(mktemp -d)"
    python3 -m wheel unpack -d "$work" "$wheel" >/dev/null
    for glob in "$@"; do
        # shellcheck disable=SC2086
        rm -rf "$work"/*/$glob
    done
    rm "$wheel"
    python3 -m wheel pack -d wheels "$work"/* >/dev/null
    rm -rf "$work"
}
python3 -m pip install -q wheel 2>&1 | grep -v "^WARNING" || true
slim wheels/bitsandbytes-*.whl 'bitsandbytes/libbitsandbytes_cuda1[12]*.so' \
    'bitsandbytes/libbitsandbytes_rocm*.so'
slim wheels/gradio-6*.whl 'gradio/templates/frontend' 'gradio/templates/node' 'gradio/media_assets/videos'
du -sh wheels
