/*
 * test_template.c - the chat template engine and the model's template.
 *
 * The goldens (tests/data/templates/expected/golden.json) were rendered by
 * jinja2 configured as transformers configures it
 * (tools/render-template-reference.py): every case must come out byte for
 * byte. The feature tests below carry expectations worked out by hand from
 * Jinja's and Python's documented behaviour.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "testutil.h"

/* ---- helpers -------------------------------------------------------------- */

/* Renders src with vars (a JSON object); *st the status, errbuf the message. */
static char *try_render(const char *src, const char *vars, coli_status *st, char *err, size_t errcap)
{
    coli_chat_template *t = NULL;
    char *out = NULL;
    *st = coli_chat_template_compile(src, strlen(src), &t, err, errcap);
    if (*st != COLI_OK) {
        ck_assert_ptr_null(t);
        return NULL;
    }
    *st = coli_chat_template_render(t, vars, strlen(vars), &out, NULL, err, errcap);
    coli_chat_template_free(t);
    if (*st != COLI_OK)
        ck_assert_ptr_null(out);
    return out;
}

static void expect(const char *src, const char *vars, const char *want)
{
    char err[512];
    coli_status st;
    char *got = try_render(src, vars, &st, err, sizeof err);
    ck_assert_msg(st == COLI_OK, "%s: %s (%s)", src, coli_status_name(st), err);
    ck_assert_msg(strcmp(got, want) == 0, "%s\n  want [%s]\n  got  [%s]", src, want, got);
    coli_free(got);
}

/* A failure with status want whose message contains each of the parts. */
static void expect_error(const char *src, const char *vars, coli_status want, const char *part1, const char *part2)
{
    char err[512];
    coli_status st;
    char *got = try_render(src, vars, &st, err, sizeof err);
    ck_assert_msg(st == want, "%s: got %s, want %s (%s)", src, coli_status_name(st), coli_status_name(want), err);
    ck_assert_ptr_null(got);
    ck_assert_msg(!part1 || strstr(err, part1), "%s: message [%s] lacks [%s]", src, err, part1);
    ck_assert_msg(!part2 || strstr(err, part2), "%s: message [%s] lacks [%s]", src, err, part2);
}

/* ---- the goldens ------------------------------------------------------------ */

START_TEST(test_goldens)
{
    char *dir = tu_path(tu_data_dir(), "templates");
    char *path = tu_path(dir, "expected/golden.json");
    coli__json_doc *doc = NULL;
    coli__err e;
    ck_assert_int_eq(coli__json_parse_file_max(path, (size_t)64 << 20, &doc, &e), COLI_OK);
    const coli__json *cases = coli__json_get(coli__json_root(doc), "cases");
    ck_assert_ptr_nonnull(cases);
    ck_assert_int_ge(cases->len, 100);
    size_t passed = 0, errors = 0;
    for (uint32_t i = 0; i < cases->len; i++) {
        const coli__json *c = &cases->items[i];
        const char *name = coli__json_get_str(c, "name", "?");
        const coli__json *vars = coli__json_get(c, "vars_json");
        const coli__json *want = coli__json_get(c, "output");
        char *tpath = tu_path(dir, coli__json_get_str(c, "template", ""));
        size_t tn;
        char *src = tu_read_file(tpath, &tn);
        ck_assert_msg(src != NULL, "%s: cannot read %s", name, tpath);
        coli_chat_template *t = NULL;
        char err[512], *out = NULL;
        size_t on = 0;
        ck_assert_int_eq(coli_chat_template_compile(src, tn, &t, err, sizeof err), COLI_OK);
        coli_status st = coli_chat_template_render(t, vars->str, vars->len, &out, &on, err, sizeof err);
        if (want) {
            ck_assert_msg(st == COLI_OK, "%s: %s", name, err);
            ck_assert_msg(on == want->len && memcmp(out, want->str, on) == 0, "%s:\n  want [%s]\n  got  [%s]", name,
                          want->str, out);
        } else {
            /* raise_exception's message must come through; other errors are
             * Python's own and only their kind is compared. */
            const char *kind = coli__json_get_str(c, "error_kind", "");
            ck_assert_msg(st == COLI_EINVAL, "%s: want an error, got %s", name, coli_status_name(st));
            if (strcmp(kind, "raise") == 0)
                ck_assert_msg(strstr(err, coli__json_get_str(c, "error", "")) != NULL, "%s: message [%s]", name, err);
            errors++;
        }
        coli_free(out);
        coli_chat_template_free(t);
        free(src);
        free(tpath);
        passed++;
    }
    ck_assert_uint_eq(passed, cases->len);
    ck_assert_uint_ge(errors, 5);
    coli__json_free(doc);
    free(path);
    free(dir);
}
END_TEST

/* ---- whitespace --------------------------------------------------------------- */

START_TEST(test_whitespace)
{
    /* trim_blocks eats the newline after a block tag; lstrip_blocks the
     * blanks before one at a line's start; comments count as blocks. */
    expect("a\n  {% if true %}\n  b\n  {% endif %}\n  {# c #}\nc\n", "{}", "a\n  b\nc");
    expect("a  {{- 'b' -}}  c", "{}", "abc");
    expect("x\n  {%- if true %}y{% endif %}", "{}", "xy");
    expect("  {%+ if true %}x{% endif %}", "{}", "  x");
    expect("{% if true -%}\n\n  x{%- endif %}", "{}", "x");
    /* Only the template's last newline goes; CRLF reads as LF. */
    expect("hi\n\n", "{}", "hi\n");
    expect("a\r\nb\r\n", "{}", "a\nb");
    expect("a{# note #}b{#- x -#}  c", "{}", "abc");
    /* {{ }} never strips: "  {{ 1 }}" keeps its blanks. */
    expect("  {{ 1 }}\n", "{}", "  1");
    /* "+%}" keeps the newline trim_blocks would eat; raw text is as it is. */
    expect("{% if true +%}\nx{% endif %}", "{}", "\nx");
    expect("{% raw %}{{ x }}{% if %}{% endraw %}|{%- raw -%}  a  {%- endraw %}", "{}", "{{ x }}{% if %}|a");
    expect_error("{% raw %}x", "{}", COLI_EFORMAT, "raw", NULL);
    /* transformers' {% generation %} renders its body. */
    expect("{% for m in ms %}{% generation %}\n  <{{ m }}>\n{% endgeneration %}{% endfor %}", "{\"ms\": [\"a\", \"b\"]}",
           "  <a>\n  <b>\n");
}
END_TEST

/* ---- values and printing --------------------------------------------------- */

START_TEST(test_printing)
{
    expect("{{ true }} {{ false }} {{ none }} {{ [true, none, 'a', \"it's\"] }}", "{}",
           "True False None [True, None, 'a', \"it's\"]");
    expect("{{ {'a': [1, (2, 3)], 'b': (1,)} }}", "{}", "{'a': [1, (2, 3)], 'b': (1,)}");
    /* Floats as Python's repr: shortest round trip, ".0", exponents. */
    expect("{{ 1.0 }} {{ 0.1 }} {{ 1e16 }} {{ 1e-5 }} {{ 10/4 }} {{ 2**0.5 }} {{ 1/3 }} {{ 100.0 }} {{ 123456789.0 }}"
           " {{ f }} {{ -0.0 }} {{ 1.5e300 * 1e10 }} {{ 0.1 + 0.2 }}",
           "{\"f\": 2.50}",
           "1.0 0.1 1e+16 1e-05 2.5 1.4142135623730951 0.3333333333333333 100.0 123456789.0 2.5 -0.0 inf "
           "0.30000000000000004");
    expect("{{ 'a\\tb' }}|{{ \"q\\\"q\" }}|{{ '\\u00e9' }}|{{ 'x\\\\y' }}|{{ 'a' 'b' }}|{{ 1_000 }}", "{}",
           "a\tb|q\"q|\xc3\xa9|x\\y|ab|1000");
}
END_TEST

START_TEST(test_undefined)
{
    expect("{{ nope }}|{{ nope is defined }}|{% for x in nope %}x{% endfor %}|{{ m.missing }}|{{ nope|length }}|"
           "{{ m.missing is defined }}|{{ m['missing'] is undefined }}|{{ [1][5] is defined }}",
           "{\"m\": {}}", "|False|||0|False|True|False");
    /* Reading a member of an undefined value fails, as in Jinja. */
    expect_error("ok\n{{ nope.attr }}", "{}", COLI_EINVAL, "'nope' is undefined", "line 2");
    expect_error("{{ m.a.b }}", "{\"m\": {}}", COLI_EINVAL, "has no attribute 'a'", NULL);
    expect_error("{{ nope + 1 }}", "{}", COLI_EINVAL, "undefined", NULL);
    expect("{{ 'y' if false }}|{{ x|default('d') }}|{{ ''|default('d') }}|{{ ''|d('d', true) }}", "{}", "|d||d");
}
END_TEST

START_TEST(test_tojson)
{
    expect("{{ x|tojson }}", "{\"x\": {\"a\": [1, 2.5, \"\xc3\xa9\\\"\\n\"], \"b\": null, \"c\": true}}",
           "{\"a\": [1, 2.5, \"\xc3\xa9\\\"\\n\"], \"b\": null, \"c\": true}");
    expect("{{ '\xc3\xa9\xf0\x9f\x98\x80'|tojson(ensure_ascii=true) }}", "{}", "\"\\u00e9\\ud83d\\ude00\"");
    expect("{{ {'a': [1]}|tojson(indent=2) }}", "{}", "{\n  \"a\": [\n    1\n  ]\n}");
    expect("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ {'b': 1, 'a': 2}|tojson }}", "{}",
           "{\"a\": 2, \"b\": 1}|{\"b\": 1, \"a\": 2}");
    expect("{{ [1, {'k': 'v'}, [], {}]|tojson(separators=(',', ':')) }}", "{}", "[1,{\"k\":\"v\"},[],{}]");
    expect("{{ '\\x01<>&\\u007f'|tojson }}", "{}", "\"\\u0001<>&\x7f\"");
    expect_error("{{ nope|tojson }}", "{}", COLI_EINVAL, NULL, NULL);
}
END_TEST

/* ---- expressions -------------------------------------------------------------- */

START_TEST(test_expressions)
{
    expect("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 'ab' * 2 }} {{ 1 + 2 * 3 }} {{ 'a' ~ 1 ~ none }}",
           "{}", "3 -4 2 1024 abab 7 a1None");
    expect("{{ 0 or 'a' }} {{ 'b' and 'c' }} {{ none or [] }} {{ '' and 1 }}|{{ not 0 }}", "{}", "a c [] |True");
    expect("{{ 'y' if 1 > 0 else 'n' }}{{ 'y' if 1 < 0 else 'n' }}", "{}", "yn");
    expect("{{ 'a' in 'cat' }} {{ 2 not in [1,2] }} {{ 'k' in {'k': 1} }} {{ 1 == 1.0 }} {{ 1 < 2 < 3 }} {{ [1,2] < [1,3] }}",
           "{}", "True False True True True True");
    expect("{{ 'abcdef'[1:4] }}{{ 'abcdef'[::-2] }}{{ [1,2,3,4][-2:] }}{{ 'h\xc3\xa9llo'[1] }}{{ [1,2,3][::-1] }}"
           "{{ 'abc'[-1] }}{{ [1,2,3][5:] }}",
           "{}", "bcdfdb[3, 4]\xc3\xa9[3, 2, 1]c[]");
    expect("{{ m.role }}{{ m['role'] }}{{ m.get('role') }}{{ m.get('x', 5) }}{{ m.keys()|list }}", "{\"m\": {\"role\": \"u\"}}",
           "uuu5['role']");
    expect("{{ '%s-%d' % ('a', 3) }}|{{ '%5s|%-5s|' % ('ab', 'cd') }}{{ '%05d %+d' % (42, 5) }}|{{ '%.2f' % 3.14159 }}|"
           "{{ '100%%' % () }}|{{ '%r' % 'q' }}",
           "{}", "a-3|   ab|cd   |00042 +5|3.14|100%|'q'");
    expect_error("{{ '%s %s' % ('a',) }}", "{}", COLI_EINVAL, "not enough arguments", NULL);
    expect_error("{{ 1 / 0 }}", "{}", COLI_EINVAL, "division by zero", NULL);
    expect_error("{{ 'a' + 1 }}", "{}", COLI_EINVAL, "str", NULL);
    expect_error("{{ 1 < 'a' }}", "{}", COLI_EINVAL, "'<' not supported", NULL);
}
END_TEST

START_TEST(test_strings)
{
    expect("{{ '  x y  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b c'.rsplit(' ', 1) }}|"
           "{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}|{{ 'hello world'.title() }}|{{ 'a-b'.replace('-', '+') }}|"
           "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}",
           "{}", "x y|hi|['a', 'b', '', 'c']|['a b', 'c']|HELLOhello|Hello World|a+b|TrueTrue");
    expect("{{ ' a  b '.split() }}{{ '\\n\\nx\\n'.lstrip('\\n') }}{{ 'x</think>y'.split('</think>')[-1] }}", "{}",
           "['a', 'b']x\ny");
    /* Non-ASCII: characters, not bytes; no-break space is whitespace. */
    expect("{{ '\xc3\xa9t\xc3\xa9'|length }} {{ '\xc3\xa9t\xc3\xa9'|upper }} {{ '\xc2\xa0x\xc2\xa0'.strip() }}", "{}",
           "3 \xc3\x89T\xc3\x89 x");
}
END_TEST

START_TEST(test_filters)
{
    expect("{{ [3,1,2]|sort|join(',') }} {{ [1,2,3]|reverse|list }} {{ ['a','b']|first }}{{ ['a','b']|last }} "
           "{{ [1,1,2]|unique|list }} {{ msgs|map(attribute='role')|join(' ') }} "
           "{{ msgs|selectattr('role', 'eq', 'user')|list|length }} {{ [1,2,3,4]|select('even')|list }} "
           "{{ [1,2,3]|reject('odd')|list }} {{ '  t  '|trim }} {{ -3|abs }} {{ 3.7|int }} {{ '4'|int + 1 }} "
           "{{ 2|float }} {{ 2.567|round(2) }} {{ [1,2,3]|sum }} {{ [4,2,9]|max }} {{ [4,2,9]|min }} "
           "{{ 'ab\\ncd'|indent(2) }}",
           "{\"msgs\": [{\"role\": \"user\"}, {\"role\": \"assistant\"}, {\"role\": \"user\"}]}",
           "1,2,3 [3, 2, 1] ab [1, 2] user assistant user 2 [2, 4] [2] t 3 3 5 2.0 2.57 6 9 2 ab\n  cd");
    expect("{{ {'b': 1, 'a': 2}|dictsort }} {{ {'a': 1}|items|list }} {{ ['b', 'A', 'a']|sort }} {{ 'x'|string }}"
           "{{ 5|string }} {{ 'hello world'|capitalize }} {{ 'a b'|title }} {{ 'a b c'|wordcount }}",
           "{}", "[('a', 2), ('b', 1)] [('a', 1)] ['A', 'a', 'b'] x5 Hello world A B 3");
}
END_TEST

START_TEST(test_tests)
{
    expect("{{ 1 is number }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ none is none }}"
           "{{ 4 is divisibleby(2) }}{{ 3 is odd }}{{ 1 is eq(1) }}{{ true is boolean }}{{ 1 is integer }}"
           "{{ 1.5 is float }}{{ x is false }}{{ 'ab' is lower }}{{ 2 is in [1, 2] }}{{ 4 is divisibleby 2 }}",
           "{\"x\": false}", "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue");
    expect("{{ 'a' is not string }}{{ none is not none }}{{ true is integer }}{{ [] is mapping }}", "{}",
           "FalseFalseFalseFalse");
}
END_TEST

/* ---- statements ------------------------------------------------------------ */

START_TEST(test_loops)
{
    expect("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
           "{{ loop.revindex }} {% endfor %}",
           "{}", "10TrueFalse33 21FalseFalse32 32FalseTrue31 ");
    expect("{% for x in [1,2,3,4] if x is odd %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|"
           "{% for x in [] %}x{% else %}empty{% endfor %}|"
           "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}"
           "{{ x }}{% endfor %}",
           "{}", "1232|empty|013");
    expect("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
           "{\"d\": {\"b\": 1, \"a\": 2}}", "b=1;a=2;ba");
    expect("{% for m in ms %}{{ loop.previtem|default('-') }}{{ loop.cycle('x', 'y') }}{% endfor %}", "{\"ms\": [1, 2, 3]}",
           "-x1y2x");
    expect_error("{% break %}", "{}", COLI_EINVAL, "outside a loop", NULL);
}
END_TEST

START_TEST(test_set_namespace_macro)
{
    /* set in a loop stays in its iteration; a namespace carries across. */
    expect("{% set x = 1 %}{% set ns = namespace(y=1) %}{% for i in [1,2] %}{% set x = x + i %}"
           "{% set ns.y = ns.y + i %}{% endfor %}{{ x }} {{ ns.y }}",
           "{}", "1 4");
    expect("{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c %}in {{ a }}{% endset %}[{{ c }}]", "{}", "12[in 1]");
    expect("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
           "{{ greet('Ann') }} {{ greet('Bob', punct='?') }} {{ greet('x').endswith('!') }} {{ greet() }}",
           "{}", "Hi Ann! Hi Bob? True Hi !");
    expect("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}", "{}", "321");
    expect_error("{% set y = 1 %}{% set y.a = 2 %}", "{}", COLI_EINVAL, "non-namespace", NULL);
    expect_error("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}", "{}", COLI_EINVAL, "argument", NULL);
    /* The sandbox is immutable. */
    expect_error("{% set xs = [1] %}{{ xs.append(2) }}", "{}", COLI_EINVAL, "unsafe", NULL);
}
END_TEST

/* ---- errors and bounds ----------------------------------------------------- */

START_TEST(test_errors)
{
    char err[512];
    coli_status st;
    expect_error("line1\n{{ raise_exception('bad ' ~ 1) }}", "{}", COLI_EINVAL, "bad 1", "line 2");
    /* Malformed variables. */
    expect_error("x", "{", COLI_EFORMAT, NULL, NULL);
    expect_error("x", "[1]", COLI_EFORMAT, "object", NULL);
    expect_error("x", "", COLI_EFORMAT, NULL, NULL);
    /* Syntax errors give line:column. */
    expect_error("{% if x %}", "{}", COLI_EFORMAT, "expected 'endif'", NULL);
    expect_error("ab\n{{ 1 + }}", "{}", COLI_EFORMAT, "2:8:", NULL);
    expect_error("{% foo %}", "{}", COLI_EFORMAT, "1:4:", "foo");
    expect_error("{{ 'abc }}", "{}", COLI_EFORMAT, "unterminated", NULL);
    expect_error("{{ x|nofilter }}", "{}", COLI_EFORMAT, "no filter named 'nofilter'", NULL);
    expect_error("{{ x is notatest }}", "{}", COLI_EFORMAT, "no test named", NULL);
    expect_error("{# open", "{}", COLI_EFORMAT, "comment", NULL);
    /* NULL arguments. */
    coli_chat_template *t = NULL;
    ck_assert_int_eq(coli_chat_template_compile("x", 1, NULL, err, sizeof err), COLI_EINVAL);
    ck_assert_int_eq(coli_chat_template_compile("x", 1, &t, NULL, 0), COLI_OK);
    char *out = NULL;
    ck_assert_int_eq(coli_chat_template_render(t, "{}", 2, NULL, NULL, NULL, 0), COLI_EINVAL);
    ck_assert_int_eq(coli_chat_template_render(NULL, "{}", 2, &out, NULL, NULL, 0), COLI_EINVAL);
    /* A source with a NUL inside and no terminator is read by length. */
    ck_assert_int_eq(coli_chat_template_render(t, "{}xyz", 2, &out, NULL, err, sizeof err), COLI_OK);
    ck_assert_str_eq(out, "x");
    coli_free(out);
    coli_chat_template_free(t);
    coli_chat_template_free(NULL);
    ck_assert_int_eq(coli_chat_template_compile("a\0b{{ 1 }}", 10, &t, err, sizeof err), COLI_OK);
    size_t n = 0;
    ck_assert_int_eq(coli_chat_template_render(t, "{}", 2, &out, &n, err, sizeof err), COLI_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(memcmp(out, "a\0b1", 4), 0);
    coli_free(out);
    coli_chat_template_free(t);
    (void)st;
}
END_TEST

START_TEST(test_limits)
{
    /* Loops (and the memory their iterations take), output, recursion,
     * nesting at compile time: all COLI_ERANGE, never a crash. */
    expect_error("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(100) %}{% endfor %}"
                 "{% endfor %}{% endfor %}",
                 "{}", COLI_ERANGE, NULL, NULL);
    expect_error("{% for i in range(1000) %}{{ 'x' * 100000 }}{% endfor %}", "{}", COLI_ERANGE, "MiB", NULL);
    expect_error("{{ 'x' * 100000000 }}", "{}", COLI_ERANGE, NULL, NULL);
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}", COLI_ERANGE, "deep", NULL);
    expect_error("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 "{}", COLI_ERANGE, NULL, NULL);
    expect_error("{{ 9223372036854775807 + 1 }}", "{}", COLI_ERANGE, NULL, NULL);
    size_t depth = 1000;
    char *src = malloc(2 * depth + 16);
    ck_assert_ptr_nonnull(src);
    strcpy(src, "{{ ");
    for (size_t i = 0; i < depth; i++)
        strcat(src, "(");
    strcat(src, "1");
    for (size_t i = 0; i < depth; i++)
        strcat(src, ")");
    strcat(src, " }}");
    coli_chat_template *t = NULL;
    char err[256];
    ck_assert_int_eq(coli_chat_template_compile(src, strlen(src), &t, err, sizeof err), COLI_ERANGE);
    ck_assert_ptr_null(t);
    free(src);
    /* Deep values built at run time are refused where they are walked. */
    expect_error("{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                 "{{ ns.x|tojson }}",
                 "{}", COLI_ERANGE, NULL, NULL);
}
END_TEST

/* ---- the model's template -------------------------------------------------- */

static coli_model *open_copy(const char *dir)
{
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(dir, NULL, &m), COLI_OK);
    return m;
}

START_TEST(test_model_template)
{
    char *src = tu_path(tu_data_dir(), "qwen3_moe"), *dir = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(src, dir), 0);

    /* The fixture has no template; its eos_token is a string, bos null. */
    coli_model *m = open_copy(dir);
    ck_assert_ptr_null(coli_model_chat_template(m));
    ck_assert_str_eq(coli_model_special_text(m, "eos_token"), "<|endoftext|>");
    ck_assert_str_eq(coli_model_special_text(m, "pad_token"), "<|endoftext|>");
    ck_assert_ptr_null(coli_model_special_text(m, "bos_token"));
    ck_assert_ptr_null(coli_model_special_text(m, "no_such_token"));
    ck_assert_ptr_null(coli_model_special_text(m, NULL));
    coli_model_free(m);
    ck_assert_ptr_null(coli_model_chat_template(NULL));

    /* chat_template.jinja when tokenizer_config.json has none. */
    char *jinja = tu_path(dir, "chat_template.jinja");
    ck_assert_int_eq(tu_write_file(jinja, "{{ bos_token }}file\n", 20), 0);
    m = open_copy(dir);
    ck_assert_str_eq(coli_model_chat_template(m), "{{ bos_token }}file\n");
    coli_model_free(m);

    /* tokenizer_config.json's string wins; special tokens as objects. */
    ck_assert_int_eq(tu_replace_in_file(dir, "tokenizer_config.json", "\"bos_token\": null",
                                        "\"chat_template\": \"{{ eos_token }}cfg\", "
                                        "\"bos_token\": {\"content\": \"<s>\", \"lstrip\": false}"),
                     0);
    m = open_copy(dir);
    ck_assert_str_eq(coli_model_chat_template(m), "{{ eos_token }}cfg");
    ck_assert_str_eq(coli_model_special_text(m, "bos_token"), "<s>");
    coli_model_free(m);

    /* The list form: the entry named "default". */
    ck_assert_int_eq(tu_replace_in_file(dir, "tokenizer_config.json", "\"chat_template\": \"{{ eos_token }}cfg\"",
                                        "\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, "
                                        "{\"name\": \"default\", \"template\": \"D\"}]"),
                     0);
    m = open_copy(dir);
    ck_assert_str_eq(coli_model_chat_template(m), "D");
    coli_model_free(m);

    /* A template file over 1 MiB is refused, naming the file. */
    ck_assert_int_eq(tu_replace_in_file(dir, "tokenizer_config.json", "\"name\": \"default\"", "\"name\": \"other\""), 0);
    size_t big = ((size_t)1 << 20) + 1;
    char *blob = malloc(big);
    ck_assert_ptr_nonnull(blob);
    memset(blob, 'x', big);
    ck_assert_int_eq(tu_write_file(jinja, blob, big), 0);
    free(blob);
    m = NULL;
    ck_assert_int_eq(coli_model_open(dir, NULL, &m), COLI_EFORMAT);
    ck_assert_ptr_nonnull(strstr(coli_model_errmsg(m), "chat_template.jinja"));
    coli_model_free(m);

    tu_rmtree(dir);
    free(jinja);
    free(dir);
    free(src);
}
END_TEST

/* The model's own template renders with its own special tokens. */
START_TEST(test_model_template_renders)
{
    char *src = tu_path(tu_data_dir(), "qwen3_moe"), *dir = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(src, dir), 0);
    char *jinja = tu_path(dir, "chat_template.jinja");
    const char *body = "{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}";
    ck_assert_int_eq(tu_write_file(jinja, body, strlen(body)), 0);
    coli_model *m = open_copy(dir);
    const char *tsrc = coli_model_chat_template(m);
    coli_chat_template *t = NULL;
    char err[256], vars[256], *out = NULL;
    ck_assert_int_eq(coli_chat_template_compile(tsrc, strlen(tsrc), &t, err, sizeof err), COLI_OK);
    snprintf(vars, sizeof vars, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"eos_token\": \"%s\"}",
             coli_model_special_text(m, "eos_token"));
    ck_assert_int_eq(coli_chat_template_render(t, vars, strlen(vars), &out, NULL, err, sizeof err), COLI_OK);
    ck_assert_str_eq(out, "hi<|endoftext|>");
    coli_free(out);
    coli_chat_template_free(t);
    coli_model_free(m);
    tu_rmtree(dir);
    free(jinja);
    free(dir);
    free(src);
}
END_TEST

static Suite *template_suite(void)
{
    Suite *s = suite_create("template");
    TCase *golden = tcase_create("golden");
    TCase *features = tcase_create("features");
    TCase *model = tcase_create("model");

    tcase_set_timeout(golden, 60);
    tcase_add_test(golden, test_goldens);
    suite_add_tcase(s, golden);

    tcase_set_timeout(features, 60);
    tcase_add_test(features, test_whitespace);
    tcase_add_test(features, test_printing);
    tcase_add_test(features, test_undefined);
    tcase_add_test(features, test_tojson);
    tcase_add_test(features, test_expressions);
    tcase_add_test(features, test_strings);
    tcase_add_test(features, test_filters);
    tcase_add_test(features, test_tests);
    tcase_add_test(features, test_loops);
    tcase_add_test(features, test_set_namespace_macro);
    tcase_add_test(features, test_errors);
    tcase_add_test(features, test_limits);
    suite_add_tcase(s, features);

    tcase_set_timeout(model, 120);
    tcase_add_test(model, test_model_template);
    tcase_add_test(model, test_model_template_renders);
    suite_add_tcase(s, model);
    return s;
}

int main(void)
{
    return tu_run_suite(template_suite());
}
