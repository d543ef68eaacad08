# cli_expect.sh - sourced by the command-line test scripts (cli_tpu1.sh,
# cli_sim_devices.sh) after they set sy (the systolic binary) and failed=0:
#
# expect STATUS REGEX ARGS...: `$sy ARGS...` exits with STATUS, and its
# stdout + stderr match REGEX, where "~" stands for a line's end (the
# output's lines joined by it); otherwise it says what it got and sets
# failed=1.
expect() {
    want=$1 re=$2
    shift 2
    out=$("$sy" "$@" 2>&1)
    rc=$?
    if [ "$rc" != "$want" ] || ! printf '%s~' "$out" | tr '\n' '~' | grep -Eq -- "$re"; then
        echo "FAIL: systolic $*"
        echo "  exit status $rc (want $want); output: $out"
        echo "  wanted: $re"
        failed=1
    fi
}
