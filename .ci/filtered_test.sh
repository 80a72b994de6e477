# Sourced by .ci/run.
#
#   check_filters CARGO_TEST_ARGS... -- FILTER...
#
# Fails unless every FILTER selects at least one test of `cargo test CARGO_TEST_ARGS` (`--list`):
# a suite named by its filters whose tests were renamed or moved away must fail, not pass with
# nothing run.
check_filters() {
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
            echo "check_filters: the filter '$filter' selects no test of 'cargo test ${args[*]}'" >&2
            return 1
        fi
        echo "check_filters: '$filter' selects $count tests of 'cargo test ${args[*]}'"
    done
}
