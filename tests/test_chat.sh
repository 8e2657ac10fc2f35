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

# --mtp on the GLM demo: the same reply as without
glm=$(dirname "$demo")/demo-glm
printf 'In the beginning God created\n/exit\n' >"$tmp/one"
"$COLI" chat --model "$glm" --temperature 0 --max-tokens 40 <"$tmp/one" >"$tmp/plain" 2>/dev/null
"$COLI" chat --model "$glm" --temperature 0 --max-tokens 40 --mtp --no-mtp-guard <"$tmp/one" >"$out" 2>"$err"
if [ -s "$out" ] && cmp -s "$out" "$tmp/plain"; then
	pass "chat --mtp gives the reply without it"
else
	fail "chat --mtp: '$(cat "$out" "$err")' against '$(cat "$tmp/plain")'"
fi

# Ctrl-C stops a reply (slowed to 50 ms a token) and the chat goes on;
# at the prompt it ends the chat
mkfifo "$tmp/in"
# empty before the chat starts: the shell opens (and truncates) them only
# after the FIFO, so the last case's reply could read as this one's, and
# a Ctrl-C sent then would reach the chat before its handler is set
: >"$out"
: >"$err"
COLI_SERVE_STEP_DELAY_MS=50 "$COLI" chat --model "$demo" --temperature 0 --max-tokens 400 <"$tmp/in" \
	>"$out" 2>"$err" &
chat=$!
# until_grows N: waits (up to 5 minutes: a sanitizer build under load
# opens the model slowly, and Ctrl-C before the chat is up is ignored, as a
# background job's) for the reply output to pass N bytes
until_grows() {
	i=0
	while [ "$(wc -c <"$out")" -le "$1" ] && [ $i -lt 3000 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
exec 3>"$tmp/in"
echo "In the beginning God created" >&3
until_grows 0
kill -INT $chat
i=0
while ! grep -q 'the reply was stopped' "$err" && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
n=$(wc -c <"$out")
echo "And God said" >&3
until_grows "$n"
kill -INT $chat
i=0
while [ "$(grep -c 'the reply was stopped' "$err")" -lt 2 ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
n2=$(wc -c <"$out")
kill -INT $chat 2>/dev/null
exec 3>&-
wait $chat
status=$?
words=$(wc -w <"$out")
# each reply gave at least its first piece (a loaded machine may deliver
# Ctrl-C right after it) and neither ran to its 400 tokens
if [ "$status" = 0 ] && [ "$(grep -c 'the reply was stopped' "$err")" = 2 ] && [ "$n" -gt 0 ] &&
	[ "$n2" -gt "$n" ] && [ "$words" -lt 200 ]; then
	pass "Ctrl-C stops a reply, the next turn is answered, and Ctrl-C at the prompt ends"
else
	fail "Ctrl-C: status $status, $n then $n2 bytes, $words words, stderr: $(cat "$err")"
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
