# Sourced from the repo root by scripts/gpu_bench.sh and scripts/gpu_smoke.sh: the environment of
# an offline GPU check. specdemo on PYTHONPATH, no Hub, converted models in $SPECDEMO_CACHE
# (default /tmp/specdemo-gpu-cache), and the wheels in wheels/ (bitsandbytes, and transformers
# when the machine's lies outside the range requirements.txt pins) installed offline into a
# scratch folder put first on PYTHONPATH; a script started by another that already did so
# installs nothing, and nor does a dry run.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export SPECDEMO_CACHE="${SPECDEMO_CACHE:-/tmp/specdemo-gpu-cache}"

site=/tmp/specdemo-site
# A dry run (--dry-run among the caller's arguments, or its $dry set to 1) uses this machine's
# own packages.
if compgen -G "wheels/*.whl" >/dev/null && [[ ":$PYTHONPATH:" != *":$site:"* ]] &&
    [[ " $* " != *" --dry-run "* && "${dry:-0}" != 1 ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" \
        wheels/*.whl
    export PYTHONPATH="$site:$PYTHONPATH"
fi
