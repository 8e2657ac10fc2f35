#!/bin/sh
# smoke.sh - the short fuzz run of `make fuzz-smoke`: each target replays its
# saved regressions, then runs over its seed corpus and a fixed number of
# mutations (fixed seed), so that a change that breaks a loader shows here.
#
# Usage: sh tests/fuzz/smoke.sh SRCDIR BUILDDIR [TARGET...]
# Everything it writes is under BUILDDIR/tests/fuzz/run/: the seeds, the
# inputs found (new/<target>/), each run's log, and crash-* / leak-* /
# timeout-* files for any failure. Fails on the first failing target.
set -eu

src=$1
build=$2
shift 2
targets=${*:-json safetensors tokenizer tokenizer_load model_open template request}
run=$build/tests/fuzz/run

# target -> "runs max_len": sized so that all of them together take about a
# minute on one core.
params() {
	case $1 in
	json) echo "60000 65536" ;;
	safetensors) echo "40000 4096" ;;
	tokenizer) echo "40000 2048" ;;
	tokenizer_load) echo "6000 65536" ;;
	model_open) echo "4000 81920" ;;
	template) echo "20000 8192" ;;
	request) echo "20000 8192" ;;
	*) echo "smoke.sh: unknown target $1" >&2; exit 2 ;;
	esac
}

mkdir -p "$run"
sh "$src/tests/fuzz/make-corpus.sh" "$src" "$run/seeds"
# Leaks and UB are failures too (UBSan aborts: -fno-sanitize-recover).
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export ASAN_OPTIONS UBSAN_OPTIONS

for t in $targets; do
	set -- $(params "$t")
	bin=$build/tests/fuzz/fuzz_$t
	log=$run/$t.log
	dict=
	[ -f "$src/tests/fuzz/$t.dict" ] && dict=-dict=$src/tests/fuzz/$t.dict
	start=$(date +%s)
	# Saved reproducers: each file run once.
	regs=$(find "$src/tests/fuzz/regressions/$t" -type f 2>/dev/null | sort || true)
	if [ -n "$regs" ]; then
		# shellcheck disable=SC2086 # one argument per file
		if ! "$bin" -artifact_prefix="$run/$t-" $regs >"$log" 2>&1; then
			tail -n 60 "$log"
			echo "fuzz-smoke: $t: a saved regression fails again (log: $log)" >&2
			exit 1
		fi
	fi
	rm -rf "$run/new/$t"
	mkdir -p "$run/new/$t"
	# shellcheck disable=SC2086 # $dict is empty or one word
	if ! "$bin" -seed=1 -runs="$1" -max_len="$2" -timeout=20 -rss_limit_mb=2560 \
		-print_final_stats=1 -artifact_prefix="$run/$t-" $dict \
		"$run/new/$t" "$run/seeds/$t" >>"$log" 2>&1; then
		tail -n 60 "$log"
		echo "fuzz-smoke: $t FAILED (log: $log; the input is saved as $run/$t-*)" >&2
		exit 1
	fi
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(sed -n 's/^#[0-9]*.*DONE *cov: \([0-9]*\).*/\1/p' "$log" | tail -n 1)
	echo "fuzz-smoke: $t: ${execs:-?} runs, coverage ${cov:-?}, $(($(date +%s) - start)) s: OK"
done
