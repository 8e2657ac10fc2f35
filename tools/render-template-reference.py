#!/usr/bin/python3
"""Renders chat templates with jinja2 configured as transformers does.

Golden mode (default): renders every (template, conversation, variant) of
tests/data/templates/conversations.json and writes
tests/data/templates/expected/golden.json, which tests/test_template.c
compares with libcolibri byte for byte. Run it with /usr/bin/python3
(python3-jinja2) after changing the corpus, and commit the result.

Live mode (--live DRIVER): renders randomized cases (conversations through
the fixtures and feature templates, and templates of random whitespace
control) with jinja2 and with DRIVER (tests/render_template) and reports
any difference; exit 1 if one differs. Used by tests/test_template_live.sh.

The environment is built here from transformers' documented behaviour
(chat templating, _compile_jinja_template): an immutable sandbox with
trim_blocks, lstrip_blocks, loop controls and {% generation %}, the
globals raise_exception and strftime_now, and tojson as json.dumps with
ensure_ascii off.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "templates")


class TemplateError(Exception):
    """What raise_exception raises (transformers raises jinja2's TemplateError)."""


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


class Generation(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers marks the
    assistant's text with it; rendered, it is its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, variables):
    """(output, None) or (None, (kind, message)); kind "raise" for raise_exception."""
    try:
        return env.from_string(source).render(**variables), None
    except jinja2.exceptions.TemplateSyntaxError as e:
        return None, ("syntax", str(e))
    except jinja2.exceptions.TemplateError as e:
        kind = "raise" if type(e) is jinja2.exceptions.TemplateError else "runtime"
        return None, (kind, str(e))
    except Exception as e:  # TypeError and the like from Python itself
        return None, ("runtime", "%s: %s" % (type(e).__name__, e))


def vars_json(variables):
    return json.dumps(variables, ensure_ascii=False)


def golden():
    corpus = json.load(open(os.path.join(DATA, "conversations.json"), encoding="utf-8"))
    env = environment()
    cases = []
    for tname, special in corpus["templates"].items():
        source = open(os.path.join(DATA, tname), encoding="utf-8").read()
        for conv in corpus["conversations"]:
            if tname not in conv.get("templates", corpus["templates"].keys()):
                continue
            for vi, variant in enumerate(conv.get("variants", corpus["default_variants"])):
                variables = {"messages": conv["messages"]}
                if "tools" in conv:
                    variables["tools"] = conv["tools"]
                variables.update(special)
                variables.update(variant)
                text = vars_json(variables)
                # Render from the JSON text, as the library sees it.
                out, err = render(env, source, json.loads(text))
                case = {"name": "%s/%s/%d" % (tname, conv["name"], vi), "template": tname, "vars_json": text}
                if err:
                    case["error_kind"], case["error"] = err
                else:
                    case["output"] = out
                cases.append(case)
    path = os.path.join(DATA, "expected", "golden.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/render-template-reference.py", "cases": cases}, f,
                  ensure_ascii=False, indent=1)
        f.write("\n")
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), path))


# ---- live mode: randomized conversations and small feature templates ----

WORDS = ["hello", "world", "é", "中文", "🙂", "\"q\"", "back\\slash", "new\nline", "  ", "<think>", "</think>",
         "tab\t", "{{x}}", "'s", "\u00a0", "ß", "42", "-0.5", "None", ""]

FEATURES = [
    "{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ m.role|upper }}={{ m.content|length }}"
    "{% if not loop.last %}, {% endif %}{% endfor %}",
    "{{ messages|map(attribute='role')|join('|') }} {{ messages|selectattr('role', 'equalto', 'user')|list|length }}",
    "{% set ns = namespace(n=0) %}{% for m in messages if m.role != 'system' %}{% set ns.n = ns.n + loop.index %}"
    "{% endfor %}{{ ns.n }} {{ (messages|last).content[::-1] }}",
    "{{ messages|tojson }}\n{{ messages[0]|tojson(indent=2, sort_keys=true) }}",
    "{%- for m in messages -%}\n  {%- if m.content is string and m.content.strip() -%}\n"
    "    [{{ m.content.strip().split()|join(',') }}]\n  {%- endif -%}\n{%- endfor %}",
    "{% macro show(m, sep=': ') -%}{{ m.role ~ sep ~ m.content }}{%- endmacro %}"
    "{% for m in messages %}{{ show(m) }}{{ show(m, sep=' -> ')|length }}\n{% endfor %}",
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 1 / 3 }} {{ 10 / 4 }} {{ 0.1 + 0.2 }} {{ 1e100 }}"
    " {{ 3|float }} {{ '12'|int + 1 }} {{ 2.5|round }} {{ [3, 1, 2]|sort }} {{ {'b': 1, 'a': 2}|dictsort }}",
    "{% for m in messages %}{{ m.content.replace('e', 'E').startswith('h') }}{{ 'x' in m.content }}"
    "{{ m.content.rstrip().endswith('!') }}{{ m.content.title() }}{% endfor %}",
    "{% if tools is defined %}{{ tools|length }}{% else %}none{% endif %}{{ undefined_thing|default('d') }}"
    "{{ messages[5] is defined }}{{ messages[-1].role }}",
    "{%- for m in messages %}\n  {%- if m.role == 'assistant' %}\n    {% generation %}\n    {{- m.content }}\n"
    "    {% endgeneration %}\n  {%- else %}[{{ m.content }}]{% endif %}\n{%- endfor %}",
]


TEXTS = ["", " ", "  ", "\n", "\n  ", "  \n", "a", " b ", "\t", "\n\n", "c\n  ", "\u00a0", "\r\n"]
OPENS = ["{%", "{%-", "{%+"]
CLOSES = ["%}", "-%}", "+%}"]


def random_whitespace_template(rng, depth=0):
    """Text and tags in random whitespace-control combinations."""
    out = []
    for _ in range(rng.randint(1, 5)):
        out.append(rng.choice(TEXTS))
        kind = rng.randrange(8 if depth < 3 else 4)
        o, c = rng.choice(OPENS), rng.choice(CLOSES)
        if kind == 0:
            out.append(rng.choice(["{{ 'x' }}", "{{- 'x' }}", "{{ 'x' -}}", "{{- 'x' -}}"]))
        elif kind == 1:
            out.append(rng.choice(["{# c #}", "{#- c #}", "{# c -#}", "{#- c -#}"]))
        elif kind == 2:
            out.append("%s set y = 1 %s" % (o, c))
        elif kind == 3:
            out.append(rng.choice(["{% raw %}r{{ 1 }}\n  {% endraw %}", "{%- raw -%} r {%- endraw %}"]))
        elif kind in (4, 5):
            out.append("%s if %s %s" % (o, rng.choice(["true", "false"]), c))
            out.append(random_whitespace_template(rng, depth + 1))
            if rng.random() < 0.5:
                out.append("%s else %s" % (rng.choice(OPENS), rng.choice(CLOSES)))
                out.append(random_whitespace_template(rng, depth + 1))
            out.append("%s endif %s" % (rng.choice(OPENS), rng.choice(CLOSES)))
        else:
            out.append("%s for i in [1, 2] %s" % (o, c))
            out.append(random_whitespace_template(rng, depth + 1))
            out.append("%s endfor %s" % (rng.choice(OPENS), rng.choice(CLOSES)))
    out.append(rng.choice(TEXTS))
    return "".join(out)


def random_messages(rng):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))})
    for i in range(rng.randint(1, 6)):
        role = "user" if i % 2 == 0 else "assistant"
        content = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))
        m = {"role": role, "content": content}
        if role == "assistant" and rng.random() < 0.3:
            m["content"] = "<think>\n" + content + "\n</think>\n\n" + rng.choice(WORDS)
        if role == "assistant" and rng.random() < 0.2:
            m["reasoning_content"] = rng.choice(WORDS)
        msgs.append(m)
    if msgs[-1]["role"] != "user":
        msgs.append({"role": "user", "content": rng.choice(WORDS) + "!"})
    return msgs


def live(driver, count, seed):
    env = environment()
    rng = random.Random(seed)
    sources = [(name, open(os.path.join(DATA, name), encoding="utf-8").read())
               for name in ("qwen3.jinja", "glm-4.6.jinja", "mixtral-8x7b-instruct.jinja")]
    sources += [("feature%d" % i, s) for i, s in enumerate(FEATURES)]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(count):
            name, source = sources[k % len(sources)]
            if k % 3 == 2:
                name, source = "whitespace", random_whitespace_template(rng)
            variables = {"messages": random_messages(rng), "bos_token": "<s>", "eos_token": "</s>",
                         "add_generation_prompt": rng.random() < 0.5}
            if rng.random() < 0.4:
                variables["enable_thinking"] = rng.random() < 0.5
            text = vars_json(variables)
            tpath, vpath = os.path.join(tmp, "t.jinja"), os.path.join(tmp, "v.json")
            with open(tpath, "w", encoding="utf-8", newline="") as f:
                f.write(source)
            with open(vpath, "w", encoding="utf-8") as f:
                f.write(text)
            want, err = render(env, source, json.loads(text))
            run = subprocess.run([driver, tpath, vpath], stdout=subprocess.PIPE)
            got = run.stdout.decode("utf-8", "replace")
            if err:
                ok = run.returncode == 2 and (err[0] != "raise" or err[1] in got)
            else:
                ok = run.returncode == 0 and got == want
            if not ok:
                bad += 1
                print("MISMATCH %s (seed %d, case %d)\nvars: %s\nwant: %r\ngot:  %r" %
                      (name, seed, k, text, want if not err else err, got))
    print("%d live cases, %d mismatches (seed %d)" % (count, bad, seed))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--live", metavar="DRIVER", help="compare randomized cases with DRIVER")
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    if args.live:
        seed = args.seed if args.seed is not None else random.randrange(1 << 30)
        return live(args.live, args.count, seed)
    golden()
    return 0


if __name__ == "__main__":
    sys.exit(main())
