#!/bin/sh
# test_chat.sh - `coli chat` on the demo model, fed by a here-document:
# without a chat template it says how to give one; with a template it
# answers every turn (text, or one JSON object a turn), /clear and /exit
# work; until the template engine can run the template, it says why not.
#
# Run by `make check` from the build directory, like test_cli.sh.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=$builddir/coli
demo=${COLI_DEMO_MODEL:-$srcdir/data/demo}

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_chat

# run_chat STATUS WHAT OPTIONS...: coli chat with the turns of $tmp/turns.
run_chat() {
	expected=$1
	what=$2
	shift 2
	"$COLI" chat --model "$demo" --temperature 0 --max-tokens 8 "$@" <"$tmp/turns" >"$out" 2>"$err"
	status=$?
	if [ "$status" -ne "$expected" ]; then
		fail "$what: exit status $status, expected $expected"
		sed -n '1,10s/^/    /p' "$err"
		return 1
	fi
	return 0
}

cat >"$tmp/turns" <<'TURNS'
Hello there

How are you?
/clear
Again
/exit
Never read
TURNS

# a model without a chat template: the demo's files but that one
mkdir "$tmp/bare"
for f in "$demo"/*; do
	[ "${f##*/}" = chat_template.jinja ] || ln -s "$(cd "$(dirname "$f")" && pwd)/${f##*/}" "$tmp/bare/"
done
demo_saved=$demo
demo=$tmp/bare
if run_chat 1 "chat without a template" && contains "$err" "the model has no chat template; pass --chat-template-file"; then
	pass "chat without a template says how to give one"
fi
demo=$demo_saved

# the demo's own template makes a conversation one text: the first reply
# continues it as coli generate does
printf 'In the beginning God created\n/exit\n' >"$tmp/one"
"$COLI" generate --model "$demo" --prompt "In the beginning God created" --max-tokens 8 --temperature 0 \
	>"$tmp/gen" 2>/dev/null
"$COLI" chat --model "$demo" --temperature 0 --max-tokens 8 <"$tmp/one" >"$out" 2>"$err"
want=$(tr -d '\n' <"$tmp/gen")
want=${want#In the beginning God created}
if [ "$(tr -d '\n' <"$out")" = "$want" ] && [ -n "$want" ]; then
	pass "the demo's template: the reply continues the text as coli generate does"
else
	fail "the demo's template: chat gave '$(cat "$out")', generate '$(cat "$tmp/gen")'"
fi

if run_chat 1 "chat with a missing template file" --chat-template-file "$tmp/none.jinja" &&
	contains "$err" "$tmp/none.jinja"; then
	pass "a missing template file is named"
fi

cat >"$tmp/t.jinja" <<'TMPL'
{% for m in messages %}{{ m.role }}: {{ m.content }}
{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}
TMPL
"$COLI" chat --model "$demo" --chat-template-file "$tmp/t.jinja" <"$tmp/turns" >"$out" 2>"$err"
status=$?
if [ $status -eq 0 ]; then
	# three turns answered (the empty line is skipped, /exit ends)
	if [ "$(grep -c . "$out")" -ge 1 ] && contains "$err" "the history is cleared"; then
		pass "chat answers its turns and /clear clears"
	else
		fail "chat with a template: $(cat "$out" "$err")"
	fi
	if run_chat 0 "chat --format json" --chat-template-file "$tmp/t.jinja" --format json &&
		[ "$(grep -c '^{"content":.*"finish_reason":"[a-z]*"}$' "$out")" -eq 3 ]; then
		pass "chat --format json gives an object a turn"
	else
		fail "chat --format json: $(cat "$out")"
	fi
else
	fail "chat with a template: exit status $status: $(cat "$err")"
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
