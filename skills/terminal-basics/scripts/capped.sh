#!/usr/bin/env bash
# Run a command with its full output saved to a log; print only the head, the
# tail and the exit status, so long output never floods the conversation.
# Usage: capped.sh [-n LINES] [-t SECONDS] -- COMMAND [ARGS...]
set -uo pipefail

lines=40
seconds=120
while [ $# -gt 0 ]; do
    case "$1" in
        -n) lines="$2"; shift 2 ;;
        -t) seconds="$2"; shift 2 ;;
        --) shift; break ;;
        *) break ;;
    esac
done
if [ $# -eq 0 ]; then
    echo "usage: capped.sh [-n LINES] [-t SECONDS] -- COMMAND [ARGS...]" >&2
    exit 2
fi

log="$(mktemp /tmp/capped.XXXXXX.log)"
timeout "$seconds" "$@" > "$log" 2>&1
status=$?
total=$(wc -l < "$log")
if [ "$total" -le $((2 * lines)) ]; then
    cat "$log"
else
    head -n "$lines" "$log"
    echo "... [$((total - 2 * lines)) lines omitted; full output in $log] ..."
    tail -n "$lines" "$log"
fi
if [ "$status" -eq 124 ]; then
    echo "capped.sh: timed out after ${seconds}s"
fi
echo "capped.sh: exit $status"
exit "$status"
