#!/usr/bin/env bash
# Run a command with every core kept busy by other processes, as on a developer's laptop doing
# other work at the same time:
#   scripts/under_load.sh python -m pytest tests/app/page/test_browser.py
# A test whose outcome changes here depends on the machine's load. The busy loops end with the
# command (and after an hour at most).
set -uo pipefail
pids=()
for _ in $(seq "${LOAD_PROCESSES:-$(nproc)}"); do
    timeout 3600 python3 -c "while True: pass" &
    pids+=($!)
done
"$@"
rc=$?
kill "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null
exit $rc
