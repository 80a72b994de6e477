# Sourced by .ci/run.
#
#   filtered_test CARGO_TEST_ARGS... -- FILTER...
#
# Runs `cargo test CARGO_TEST_ARGS -- FILTER...` once it has checked that every FILTER selects at
# least one test (`--list`): a suite whose tests were renamed or moved away must fail, not pass
# with nothing run.
filtered_test() {
    local args=() filters=() seen_dashes=0
    for arg in "$@"; do
        if [ "$seen_dashes" = 0 ] && [ "$arg" = "--" ]; then
            seen_dashes=1
        elif [ "$seen_dashes" = 0 ]; then
            args+=("$arg")
        else
            filters+=("$arg")
        fi
    done
    local filter count
    for filter in "${filters[@]}"; do
        count=$(cargo test "${args[@]}" -- "$filter" --list 2> /dev/null | grep -c ': test$' || true)
        if [ "$count" -eq 0 ]; then
            echo "filtered_test: the filter '$filter' selects no test of 'cargo test ${args[*]}'" >&2
            return 1
        fi
        echo "filtered_test: '$filter' selects $count tests"
    done
    cargo test "${args[@]}" -- "${filters[@]}"
}
