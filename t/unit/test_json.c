/*
 * Copyright (C) ngx_omniroute authors
 *
 * or_json: the one-pass body scanner (RFC 8259 validation, top-level
 * "model" and "stream" spans), string decoding and quoting.
 */


#include <stdlib.h>

#include "or_test.h"
#include "or_json.h"


#define TJ(s)  s, sizeof(s) - 1


typedef struct {
    const char      *doc;
    size_t           len;
    or_json_rc_e     rc;
    size_t           error_at;      /* SYNTAX, DUP_MODEL */
    const char      *error;         /* SYNTAX: the description */
    const char      *name;
} tj_doc_t;


typedef struct {
    const char      *doc;
    size_t           model_start;
    size_t           model_end;
    or_json_type_e   model_type;
    unsigned         model_escaped;
    const char      *model;         /* decoded, for a string model */
    size_t           stream_start;
    size_t           stream_end;
    or_json_type_e   stream_type;
    or_json_rc_e     rc;
    const char      *name;
} tj_span_t;


static void tj_docs(void);
static void tj_spans(void);
static void tj_depth(void);
static void tj_decode(void);
static void tj_quote(void);
static void tj_agent_body(void);
static void tj_names(void);
static void tj_tools(void);


static const tj_doc_t  tj_valid[] = {
    { TJ("{}"), OR_JSON_OK, 0, NULL, "empty object" },
    { TJ(" {} \n"), OR_JSON_OK, 0, NULL, "an object in whitespace" },
    { TJ("{\"a\":[1,{\"b\":null}],\"c\":{}}"), OR_JSON_OK, 0, NULL,
      "nested containers" },
    { TJ("{\"\":\"\"}"), OR_JSON_OK, 0, NULL, "an empty key" },
    { TJ("[]"), OR_JSON_NOT_OBJECT, 0, NULL, "empty array" },
    { TJ("[{\"model\":\"x\"}]"), OR_JSON_NOT_OBJECT, 0, NULL,
      "an array of objects" },
    { TJ("0"), OR_JSON_NOT_OBJECT, 0, NULL, "0" },
    { TJ("-0"), OR_JSON_NOT_OBJECT, 0, NULL, "-0" },
    { TJ("0.7"), OR_JSON_NOT_OBJECT, 0, NULL, "0.7" },
    { TJ("1.5e3"), OR_JSON_NOT_OBJECT, 0, NULL, "1.5e3" },
    { TJ("1E+2"), OR_JSON_NOT_OBJECT, 0, NULL, "1E+2" },
    { TJ("-1e-2"), OR_JSON_NOT_OBJECT, 0, NULL, "-1e-2" },
    { TJ("1e400"), OR_JSON_NOT_OBJECT, 0, NULL, "1e400 (beyond a double)" },
    { TJ("123456789012345678901234567890"), OR_JSON_NOT_OBJECT, 0, NULL,
      "a 30-digit integer (beyond int64)" },
    { TJ("-0.0e-0"), OR_JSON_NOT_OBJECT, 0, NULL, "-0.0e-0" },
    { TJ("\"x\""), OR_JSON_NOT_OBJECT, 0, NULL, "a string" },
    { TJ("true"), OR_JSON_NOT_OBJECT, 0, NULL, "true" },
    { TJ("false"), OR_JSON_NOT_OBJECT, 0, NULL, "false" },
    { TJ(" null "), OR_JSON_NOT_OBJECT, 0, NULL, "null" },
    { TJ("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\""), OR_JSON_NOT_OBJECT, 0, NULL,
      "every short escape" },
    { TJ("\"\\u0000\""), OR_JSON_NOT_OBJECT, 0, NULL, "\\u0000" },
    { TJ("\"\\uD800\""), OR_JSON_NOT_OBJECT, 0, NULL,
      "a lone high surrogate escape" },
    { TJ("\"\\uDC00\\uD800\""), OR_JSON_NOT_OBJECT, 0, NULL,
      "surrogate escapes in the wrong order" },
    { TJ("\"\\uD83D\\uDE00\\uabcd\\uABCD\""), OR_JSON_NOT_OBJECT, 0, NULL,
      "a surrogate pair, hex digits of either case" },
    { TJ("\"caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80\""),
      OR_JSON_NOT_OBJECT, 0, NULL, "raw UTF-8 of 2, 3 and 4 bytes" },
    { TJ("\"\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf\""),
      OR_JSON_NOT_OBJECT, 0, NULL,
      "U+D7FF, U+E000, U+FFFF, U+10FFFF" },
    { TJ("\"\x7f ~\""), OR_JSON_NOT_OBJECT, 0, NULL, "DEL is a plain byte" },
    { TJ("{\"model\":\"a\",\"model\":\"b\"}"), OR_JSON_DUP_MODEL, 13, NULL,
      "a duplicated model" },
    { TJ("{\"model\":\"a\",\"x\":1,\"mod\\u0065l\":\"b\",\"model\":1}"),
      OR_JSON_DUP_MODEL, 19, NULL, "a duplicated model, spelled escaped" },
    { TJ("{\"model\":\"a\",\"x\":{\"model\":\"b\"},\"y\":[{\"model\":1}]}"),
      OR_JSON_OK, 0, NULL, "nested model keys are no duplicates" },
    { TJ("{\"stream\":true,\"stream\":false}"), OR_JSON_OK, 0, NULL,
      "a duplicated stream is fine" },
    { TJ("{\"a\":1,\"a\":2}"), OR_JSON_OK, 0, NULL,
      "other duplicated keys are fine" },
    { TJ("{\"model\":\"cheap\",\"Model\":\"expensive\"}"),
      OR_JSON_CASE_VARIANT, 17, NULL,
      "R-NAME-2 \"Model\" beside \"model\" is a case variant" },
    { TJ("{\"model\":\"m\",\"x\":1,\"STREAM\":true}"),
      OR_JSON_CASE_VARIANT, 19, NULL, "R-NAME-2 \"STREAM\"" },
    { TJ("{\"Stream_Options\":{},\"model\":\"m\"}"),
      OR_JSON_CASE_VARIANT, 1, NULL, "R-NAME-2 \"Stream_Options\" first" },
    { TJ("{\"model\":\"m\",\"backGround\":true,\"TOOLS\":[]}"),
      OR_JSON_CASE_VARIANT, 13, NULL, "R-NAME-2 the first variant" },
    { TJ("{\"model\":\"m\",\"\\u017Ftream\":true}"),
      OR_JSON_CASE_VARIANT, 13, NULL,
      "R-NAME-2 \\u017F (long s) folds to s" },
    { TJ("{\"model\":\"m\",\"stream_opt\xc4\xb1ons\":{}}"),
      OR_JSON_CASE_VARIANT, 13, NULL, "R-NAME-2 raw dotless i folds to i" },
    { TJ("{\"model\":\"m\",\"bac\xe2\x84\xaaground\":1}"),
      OR_JSON_CASE_VARIANT, 13, NULL, "R-NAME-2 the Kelvin sign folds to k" },
    { TJ("{\"model\":\"m\",\"\\u004dodel\":1}"),
      OR_JSON_CASE_VARIANT, 13, NULL, "R-NAME-2 an escaped \"Model\"" },
    { TJ("{\"model\":\"m\",\"x\":{\"Model\":1,\"STREAM\":2}}"),
      OR_JSON_OK, 0, NULL, "R-NAME-2 nested variants are not looked at" },
    { TJ("{\"model\":\"m\",\"models\":1,\"odel\":2,\"streams\":3,"
         "\"tool\":4,\"Mod\":5}"),
      OR_JSON_OK, 0, NULL, "R-NAME-2 near names are no variants" },
    { TJ("{\"model\":\"a\",\"Model\":1,\"model\":\"b\"}"),
      OR_JSON_DUP_MODEL, 23, NULL,
      "R-NAME-2 a duplicated model comes before a variant" },
    { TJ("{\"Model\":1,\"x\""), OR_JSON_SYNTAX, 14, NULL,
      "R-NAME-2 a syntax error comes before a variant" },
    { NULL, 0, 0, 0, NULL, NULL }
};


static const tj_doc_t  tj_invalid[] = {
    { TJ(""), OR_JSON_EMPTY, 0, NULL, "nothing" },
    { TJ(" \t\r\n "), OR_JSON_EMPTY, 0, NULL, "only whitespace" },
    { TJ("{"), OR_JSON_SYNTAX, 1, "unexpected end of input", "{" },
    { TJ("{\"a\":1,}"), OR_JSON_SYNTAX, 7, "trailing comma",
      "a trailing comma in an object" },
    { TJ("[1,]"), OR_JSON_SYNTAX, 3, "trailing comma",
      "a trailing comma in an array" },
    { TJ("[1 2]"), OR_JSON_SYNTAX, 3, "expected ',' or ']'",
      "a missing comma in an array" },
    { TJ("{\"a\":1 \"b\":2}"), OR_JSON_SYNTAX, 7, "expected ',' or '}'",
      "a missing comma in an object" },
    { TJ("{\"a\" 1}"), OR_JSON_SYNTAX, 5, "expected ':'", "a missing colon" },
    { TJ("{1:2}"), OR_JSON_SYNTAX, 1, "expected a string key",
      "a number as a key" },
    { TJ("{,}"), OR_JSON_SYNTAX, 1, "expected a string key", "{,}" },
    { TJ("{\"a\":}"), OR_JSON_SYNTAX, 5, "unexpected character",
      "a missing value" },
    { TJ("[,1]"), OR_JSON_SYNTAX, 1, "unexpected character", "[,1]" },
    { TJ("{\"a\":1]"), OR_JSON_SYNTAX, 6, "expected ',' or '}'",
      "mismatched brackets" },
    { TJ("01"), OR_JSON_SYNTAX, 1, "invalid number", "a leading zero" },
    { TJ("[-01]"), OR_JSON_SYNTAX, 3, "invalid number",
      "a negative leading zero" },
    { TJ("+1"), OR_JSON_SYNTAX, 0, "unexpected character", "a plus sign" },
    { TJ(".5"), OR_JSON_SYNTAX, 0, "unexpected character", ".5" },
    { TJ("1."), OR_JSON_SYNTAX, 2, "unexpected end of input", "1. at the end" },
    { TJ("[1.]"), OR_JSON_SYNTAX, 3, "invalid number", "1." },
    { TJ("[1.e5]"), OR_JSON_SYNTAX, 3, "invalid number", "1.e5" },
    { TJ("[1e]"), OR_JSON_SYNTAX, 3, "invalid number", "1e" },
    { TJ("[1e+]"), OR_JSON_SYNTAX, 4, "invalid number", "1e+" },
    { TJ("[-]"), OR_JSON_SYNTAX, 2, "invalid number", "a lone minus" },
    { TJ("-"), OR_JSON_SYNTAX, 1, "unexpected end of input", "- at the end" },
    { TJ("[0x10]"), OR_JSON_SYNTAX, 2, "expected ',' or ']'", "hex" },
    { TJ("tru"), OR_JSON_SYNTAX, 3, "unexpected end of input",
      "a cut literal" },
    { TJ("[trUe]"), OR_JSON_SYNTAX, 3, "invalid literal", "trUe" },
    { TJ("nan"), OR_JSON_SYNTAX, 1, "invalid literal", "nan" },
    { TJ("True"), OR_JSON_SYNTAX, 0, "unexpected character", "True" },
    { TJ("truex"), OR_JSON_SYNTAX, 4, "trailing characters", "truex" },
    { TJ("{} {}"), OR_JSON_SYNTAX, 3, "trailing characters",
      "two documents" },
    { TJ("[1]]"), OR_JSON_SYNTAX, 3, "trailing characters",
      "a closing bracket too many" },
    { TJ("{\"a\":1}\0"), OR_JSON_SYNTAX, 7, "trailing characters",
      "a NUL byte after the document" },
    { TJ("\"abc"), OR_JSON_SYNTAX, 4, "unterminated string",
      "an unterminated string" },
    { TJ("{\"model\":\"abcdefghijklmnopqrstuvwxyz"), OR_JSON_SYNTAX, 36,
      "unterminated string", "an unterminated long string" },
    { TJ("\"ab\\"), OR_JSON_SYNTAX, 4, "unterminated string",
      "a backslash at the end" },
    { TJ("\"a\x01\""), OR_JSON_SYNTAX, 2, "control character in string",
      "a raw control character" },
    { TJ("\"a\tb\""), OR_JSON_SYNTAX, 2, "control character in string",
      "a raw tab in a string" },
    { TJ("\"a\0\""), OR_JSON_SYNTAX, 2, "control character in string",
      "a raw NUL in a string" },
    { TJ("\"0123456789\n\""), OR_JSON_SYNTAX, 11,
      "control character in string", "a raw newline after 10 bytes" },
    { TJ("\"\\x\""), OR_JSON_SYNTAX, 2, "invalid escape", "\\x" },
    { TJ("\"\\'\""), OR_JSON_SYNTAX, 2, "invalid escape", "\\'" },
    { TJ("\"\\U0041\""), OR_JSON_SYNTAX, 2, "invalid escape", "\\U" },
    { TJ("\"\\u12G4\""), OR_JSON_SYNTAX, 5, "invalid escape",
      "a bad hex digit" },
    { TJ("\"\\u12\""), OR_JSON_SYNTAX, 5, "invalid escape",
      "a short \\u escape" },
    { TJ("\"\\u12"), OR_JSON_SYNTAX, 5, "unterminated string",
      "a \\u escape at the end" },
    { TJ("\"\x80\""), OR_JSON_SYNTAX, 1, "invalid UTF-8",
      "a lone continuation byte" },
    { TJ("\"\xc0\x80\""), OR_JSON_SYNTAX, 1, "invalid UTF-8",
      "an overlong NUL" },
    { TJ("\"\xc1\xbf\""), OR_JSON_SYNTAX, 1, "invalid UTF-8",
      "an overlong 2-byte" },
    { TJ("\"\xe0\x80\x80\""), OR_JSON_SYNTAX, 2, "invalid UTF-8",
      "an overlong 3-byte" },
    { TJ("\"\xf0\x8f\xbf\xbf\""), OR_JSON_SYNTAX, 2, "invalid UTF-8",
      "an overlong 4-byte" },
    { TJ("\"\xed\xa0\x80\""), OR_JSON_SYNTAX, 2, "invalid UTF-8",
      "a UTF-8 encoded surrogate" },
    { TJ("\"\xf4\x90\x80\x80\""), OR_JSON_SYNTAX, 2, "invalid UTF-8",
      "above U+10FFFF" },
    { TJ("\"\xf5\x80\x80\x80\""), OR_JSON_SYNTAX, 1, "invalid UTF-8",
      "a 0xf5 lead byte" },
    { TJ("\"\xff\""), OR_JSON_SYNTAX, 1, "invalid UTF-8", "0xff" },
    { TJ("\"\xe2\x82\""), OR_JSON_SYNTAX, 3, "invalid UTF-8",
      "a cut 3-byte sequence" },
    { TJ("\"\xe2\x82"), OR_JSON_SYNTAX, 3, "unterminated string",
      "a 3-byte sequence cut by the end" },
    { TJ("\"abcdefgh\xc3\""), OR_JSON_SYNTAX, 10, "invalid UTF-8",
      "a cut 2-byte sequence after 8 plain bytes" },
    { TJ("\xef\xbb\xbf{}"), OR_JSON_SYNTAX, 0, "unexpected character",
      "a byte order mark" },
    { TJ("[\f]"), OR_JSON_SYNTAX, 1, "unexpected character",
      "form feed is no whitespace" },
    { TJ("{\"model\":\"a\",\"model\":\"b\",}"), OR_JSON_SYNTAX, 25,
      "trailing comma", "a syntax error wins over a duplicated model" },
    { TJ("{\"a\":'x'}"), OR_JSON_SYNTAX, 5, "unexpected character",
      "single quotes" },
    { TJ("{a:1}"), OR_JSON_SYNTAX, 1, "expected a string key",
      "a bare key" },
    { TJ("/* */{}"), OR_JSON_SYNTAX, 0, "unexpected character",
      "a comment" },
    { NULL, 0, 0, 0, NULL, NULL }
};


/* offsets computed independently (Python's json.raw_decode) */

static const tj_span_t  tj_span_cases[] = {
    { "{\"model\":\"gpt-4o\",\"temperature\":0.7,\"stream\":true}",
      9, 17, OR_JSON_STRING, 0, "gpt-4o", 45, 49, OR_JSON_TRUE,
      OR_JSON_OK, "plain members, 0.7" },
    { "{\"top_p\":1.5e3,\"model\":\"caf\\u00e9\",\"stream\":false}",
      23, 34, OR_JSON_STRING, 1, "caf\xc3\xa9", 44, 49, OR_JSON_FALSE,
      OR_JSON_OK, "1.5e3, \\u00e9 in the model" },
    { "{\"model\":\"a\\/b\",\"seed\":12345678901234567890,"
      "\"stream\":null}",
      9, 15, OR_JSON_STRING, 1, "a/b", 53, 57, OR_JSON_NULL,
      OR_JSON_OK, "\\/ and a 20-digit integer" },
    { "{\"metadata\":{\"model\":\"inner\",\"stream\":true},\"messages\":"
      "[{\"model\":\"x\",\"stream\":1}],\"model\":\"outer\"}",
      90, 97, OR_JSON_STRING, 0, "outer", 0, 0, OR_JSON_ABSENT,
      OR_JSON_OK, "nested model and stream keys are not top-level" },
    { "{\"mod\\u0065l\":\"esc\",\"str\\u0065am\":[1,[2,{\"stream\":3}]]}",
      14, 19, OR_JSON_STRING, 0, "esc", 34, 54, OR_JSON_ARRAY,
      OR_JSON_OK, "escaped keys, an array" },
    { " \t\r\n{ \n\"model\" \t: \r\n\"ws\" , \"stream\" :\n"
      "{ \"a\" : [ ] , \"b\":{} } \n} \n",
      20, 24, OR_JSON_STRING, 0, "ws", 38, 60, OR_JSON_OBJECT,
      OR_JSON_OK, "whitespace everywhere" },
    { "{\"stream\":true,\"model\":\"m\",\"stream\":false}",
      23, 26, OR_JSON_STRING, 0, "m", 36, 41, OR_JSON_FALSE,
      OR_JSON_OK, "a duplicated stream: the last one" },
    { "{\"model\":-0.5e-3,\"stream\":1E+2}",
      9, 16, OR_JSON_NUMBER, 0, NULL, 26, 30, OR_JSON_NUMBER,
      OR_JSON_OK, "numbers as values" },
    { "{\"model\":{\"model\":\"x\"},\"stream\":\"yes\"}",
      9, 22, OR_JSON_OBJECT, 0, NULL, 32, 37, OR_JSON_STRING,
      OR_JSON_OK, "an object as the model" },
    { "{\"x\":1e400,\"model\":\"m\\\"q\\\\\","
      "\"seed\":-12345678901234567890123}",
      19, 27, OR_JSON_STRING, 1, "m\"q\\", 0, 0, OR_JSON_ABSENT,
      OR_JSON_OK, "1e400, escapes in the model" },
    { "{\"model\":\"\",\"stream\":0}",
      9, 11, OR_JSON_STRING, 0, "", 21, 22, OR_JSON_NUMBER,
      OR_JSON_OK, "an empty model" },
    { "{\"model\" : \"sp\" }",
      11, 15, OR_JSON_STRING, 0, "sp", 0, 0, OR_JSON_ABSENT,
      OR_JSON_OK, "spaces around the value" },
    { "{\"models\":\"no\",\"Model\":\"no\",\"model \":\"no\",\"mode\":1}",
      0, 0, OR_JSON_ABSENT, 0, NULL, 0, 0, OR_JSON_ABSENT,
      OR_JSON_CASE_VARIANT,
      "near misses are not model (\"Model\" is refused: R-NAME-2)" },
    { "{\"models\":\"no\",\"model \":\"no\",\"mode\":1}",
      0, 0, OR_JSON_ABSENT, 0, NULL, 0, 0, OR_JSON_ABSENT,
      OR_JSON_OK, "near misses are not model" },
    { "{\"model\":\"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\"}",
      9, 20, OR_JSON_STRING, 0, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
      0, 0, OR_JSON_ABSENT, OR_JSON_OK, "raw UTF-8 in the model" },
    { "{\"model\":\"a\",\"model\":\"b\"}",
      9, 12, OR_JSON_STRING, 0, "a", 0, 0, OR_JSON_ABSENT,
      OR_JSON_DUP_MODEL, "a duplicated model: the first one is reported" },
    { NULL, 0, 0, 0, 0, NULL, 0, 0, 0, 0, NULL }
};


/* agent_body.py 9 smart stream (shared/fixtures): 9994 bytes */

static const char  tj_agent[] =
    "{\"model\": \"smart\", \"messages\": [{\"role\": \"system\", \"content\""
    ": \"from error error error a build called from returns line the from err"
    "or returns test error arguments file called called returns returns value"
    " test arguments module value test arguments a module with line line file"
    " the when the line error file from value path module file the a the the "
    "the the file a called the from arguments module returns file file return"
    "s module path arguments function arguments a function from value with ar"
    "guments path test the called module path the file build build called ret"
    "urns function path error value from line function build value when line "
    "path the from from arguments arguments file with from line build file a "
    "when when returns called test line build with error the error path value"
    " build called with returns when the build returns the with module argume"
    "nts called the path file path test called file arguments the function li"
    "ne arguments module value test test called returns arguments with file f"
    "ile error path from the value function path line line the returns file t"
    "est error error with a with value value test a error returns build funct"
    "ion the value with function from value arguments test path a a returns f"
    "rom test called file arguments with the the build from error arguments t"
    "he with line test with build with the path from function the called line"
    " path returns arguments with path module with line function the path mod"
    "ule file called the from test returns called line called from called wit"
    "h error with arguments from a line when with line path function value fi"
    "le function called the value path function function when file error the "
    "a returns when the called when test error function from file module the "
    "error when a the returns arguments returns module path a build called fi"
    "le module from path returns\"}, {\"role\": \"user\", \"content\": \"func"
    "tion line called module build error called the module line the path with"
    " file function file function error returns function arguments called ret"
    "urns the module arguments the function arguments the arguments from the "
    "returns the with a line error file arguments path line value line when t"
    "he from value with the the error module returns test called file when wi"
    "th path returns function line build build the when path a returns argume"
    "nts returns called a path line error when with value path error with bui"
    "ld a from from arguments arguments module arguments arguments called err"
    "or with when with with value from called the returns file arguments with"
    " test test with a error function a the line with error module function "
    "日本語テキスト ünïcödé\"}, {\"role\": \"assistant\", \"content\": \"from"
    " with a function called called returns module test when error arguments "
    "the a module called function module the value function called arguments "
    "function called the the path module when from returns called function li"
    "ne build line returns path a file build value build returns when file ar"
    "guments path from from path function from module path path the module ca"
    "lled file file called the path when path a returns file module error whe"
    "n value the function build value file returns module test when value mod"
    "ule from when test when returns a file line called from value function l"
    "ine the function file returns when with file called line when called fun"
    "ction file test when file module a value with called function 日本語テキ"
    "スト ünïcödé\"}], \"tools\": [{\"type\": \"function\", \"function\": {\""
    "name\": \"tool_0\", \"description\": \"the value file function returns b"
    "uild a module function test called function returns path path returns wi"
    "th returns build path function a with function file function with functi"
    "on build value from path value build a from build when a called\", \"par"
    "ameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": "
    "\"string\", \"description\": \"module a build returns function called li"
    "ne build path the\"}, \"limit\": {\"type\": \"integer\"}, \"ratio\": {\""
    "type\": \"number\"}}, \"required\": [\"path\"]}}}, {\"type\": \"function"
    "\", \"function\": {\"name\": \"tool_1\", \"description\": \"error error "
    "module from with when with returns from test line the error from returns"
    " a test path when the value line path function returns build the the mod"
    "ule line error returns returns arguments line returns function from erro"
    "r from\", \"parameters\": {\"type\": \"object\", \"properties\": {\"path"
    "\": {\"type\": \"string\", \"description\": \"file module the error modu"
    "le when a line function called\"}, \"limit\": {\"type\": \"integer\"}, "
    "\"ratio\": {\"type\": \"number\"}}, \"required\": [\"path\"]}}}, {\"type"
    "\": \"function\", \"function\": {\"name\": \"tool_2\", \"description\": "
    "\"from value with file file line returns when error file build arguments"
    " value path build arguments path module file with value returns when val"
    "ue with with the line when arguments from the value path build module th"
    "e value test function\", \"parameters\": {\"type\": \"object\", \"proper"
    "ties\": {\"path\": {\"type\": \"string\", \"description\": \"error build"
    " file file file file a line file function\"}, \"limit\": {\"type\": \"in"
    "teger\"}, \"ratio\": {\"type\": \"number\"}}, \"required\": [\"path\"]}}"
    "}, {\"type\": \"function\", \"function\": {\"name\": \"tool_3\", \"descr"
    "iption\": \"called returns called error when a the function a the value "
    "build a module the returns called file value arguments module module lin"
    "e a a line error line line from returns value a the arguments line when "
    "test the called\", \"parameters\": {\"type\": \"object\", \"properties\""
    ": {\"path\": {\"type\": \"string\", \"description\": \"test module value"
    " build the test from returns arguments test\"}, \"limit\": {\"type\": \""
    "integer\"}, \"ratio\": {\"type\": \"number\"}}, \"required\": [\"path\"]"
    "}}}, {\"type\": \"function\", \"function\": {\"name\": \"tool_4\", \"des"
    "cription\": \"module when module with build build test the with called w"
    "ith file with called test line module the the arguments line arguments c"
    "alled module error module module returns with a with line called the cal"
    "led line the line module returns\", \"parameters\": {\"type\": \"object"
    "\", \"properties\": {\"path\": {\"type\": \"string\", \"description\": "
    "\"a file called line when path the returns file error\"}, \"limit\": {\""
    "type\": \"integer\"}, \"ratio\": {\"type\": \"number\"}}, \"required\": "
    "[\"path\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"tool_"
    "5\", \"description\": \"file returns when when value the value error val"
    "ue line module value build build value the the a test value path called "
    "called the arguments called from test with the arguments build path valu"
    "e function module error test path test\", \"parameters\": {\"type\": \"o"
    "bject\", \"properties\": {\"path\": {\"type\": \"string\", \"description"
    "\": \"value build value test test the error when the value\"}, \"limit\""
    ": {\"type\": \"integer\"}, \"ratio\": {\"type\": \"number\"}}, \"require"
    "d\": [\"path\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \""
    "tool_6\", \"description\": \"when value line a build function the test t"
    "est build line a build function with called arguments function a test er"
    "ror build the returns error the test test called arguments error test bu"
    "ild line test with test arguments build called\", \"parameters\": {\"typ"
    "e\": \"object\", \"properties\": {\"path\": {\"type\": \"string\", \"des"
    "cription\": \"error value path a file error the returns with path\"}, \""
    "limit\": {\"type\": \"integer\"}, \"ratio\": {\"type\": \"number\"}}, \""
    "required\": [\"path\"]}}}, {\"type\": \"function\", \"function\": {\"nam"
    "e\": \"tool_7\", \"description\": \"returns called from a value module v"
    "alue arguments value error with a file line when with when path test fil"
    "e the path called module the returns module the the build error error th"
    "e file the test from test returns a\", \"parameters\": {\"type\": \"obje"
    "ct\", \"properties\": {\"path\": {\"type\": \"string\", \"description\":"
    " \"with a returns arguments arguments function when arguments value path"
    "\"}, \"limit\": {\"type\": \"integer\"}, \"ratio\": {\"type\": \"number"
    "\"}}, \"required\": [\"path\"]}}}, {\"type\": \"function\", \"function\""
    ": {\"name\": \"tool_8\", \"description\": \"arguments file value build t"
    "est line the returns arguments function when path returns arguments the "
    "returns arguments returns with returns arguments a error the the build p"
    "ath arguments value function test with a when arguments function when ca"
    "lled from from\", \"parameters\": {\"type\": \"object\", \"properties\":"
    " {\"path\": {\"type\": \"string\", \"description\": \"test called from e"
    "rror test when arguments module the arguments\"}, \"limit\": {\"type\": "
    "\"integer\"}, \"ratio\": {\"type\": \"number\"}}, \"required\": [\"path"
    "\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"tool_9\", \""
    "description\": \"function the the test build called test line with error"
    " a path line build file test from called with the called value file modu"
    "le function value the returns arguments path when function returns file "
    "test from with from function error\", \"parameters\": {\"type\": \"objec"
    "t\", \"properties\": {\"path\": {\"type\": \"string\", \"description\": "
    "\"when when arguments error the arguments module the build the\"}, \"lim"
    "it\": {\"type\": \"integer\"}, \"ratio\": {\"type\": \"number\"}}, \"req"
    "uired\": [\"path\"]}}}, {\"type\": \"function\", \"function\": {\"name\""
    ": \"tool_10\", \"description\": \"with function from called module when "
    "the the file returns line arguments test called with test the returns ar"
    "guments returns value file function file the from from with returns test"
    " value file the line value from value function test path\", \"parameters"
    "\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"strin"
    "g\", \"description\": \"test value test test the with returns the functi"
    "on value\"}, \"limit\": {\"type\": \"integer\"}, \"ratio\": {\"type\": "
    "\"number\"}}, \"required\": [\"path\"]}}}, {\"type\": \"function\", \"fu"
    "nction\": {\"name\": \"tool_11\", \"description\": \"module a file error"
    " build function the build with line arguments the error returns test bui"
    "ld returns test returns line arguments returns arguments with called wit"
    "h error line file returns line from function called returns value the ar"
    "guments from value\", \"parameters\": {\"type\": \"object\", \"propertie"
    "s\": {\"path\": {\"type\": \"string\", \"description\": \"the line funct"
    "ion line arguments a called line from test\"}, \"limit\": {\"type\": \"i"
    "nteger\"}, \"ratio\": {\"type\": \"number\"}}, \"required\": [\"path\"]}"
    "}}], \"temperature\": 0.7, \"top_p\": 0.95, \"max_tokens\": 4096, \"stre"
    "am\": true}";


static void
tj_check_docs(const tj_doc_t *t, const char *kind)
{
    or_json_rc_e    rc;
    or_json_scan_t  s;

    for ( /* void */ ; t->doc != NULL; t++) {
        rc = or_json_scan(t->doc, t->len, &s);

        or_is_str(or_json_rc_name(rc), or_json_rc_name(t->rc), "%s: %s",
                  kind, t->name);

        if (t->rc == OR_JSON_SYNTAX || t->rc == OR_JSON_DUP_MODEL
            || t->rc == OR_JSON_CASE_VARIANT)
        {
            or_is_int(s.error_at, t->error_at, "%s: %s: error_at",
                      kind, t->name);
        }

        if (t->error != NULL) {
            or_is_str(s.error, t->error, "%s: %s: error", kind, t->name);
        }

        if (t->rc == OR_JSON_OK || t->rc == OR_JSON_NOT_OBJECT) {
            or_ok(s.error == NULL && s.error_at == 0,
                  "%s: %s: no error", kind, t->name);
        }
    }
}


static void
tj_docs(void)
{
    or_json_scan_t  s;

    tj_check_docs(tj_valid, "valid");
    tj_check_docs(tj_invalid, "invalid");

    or_is_int(or_json_scan(NULL, 0, &s), OR_JSON_EMPTY,
              "invalid: NULL, 0 (an empty nginx body) is empty");
    or_is_str(s.error, "empty document", "invalid: empty: error");
}


static void
tj_spans(void)
{
    long              n;
    char              buf[256];
    or_json_rc_e      rc;
    or_json_scan_t    s;
    const tj_span_t  *t;

    for (t = tj_span_cases; t->doc != NULL; t++) {
        rc = or_json_scan(t->doc, strlen(t->doc), &s);

        or_is_str(or_json_rc_name(rc), or_json_rc_name(t->rc),
                  "spans: %s: rc", t->name);

        or_is_str(or_json_type_name(s.model.type),
                  or_json_type_name(t->model_type), "spans: %s: model type",
                  t->name);
        or_ok(s.model.start == t->model_start && s.model.end == t->model_end,
              "spans: %s: model at [%zu, %zu)", t->name, t->model_start,
              t->model_end);

        if (s.model.start != t->model_start || s.model.end != t->model_end) {
            printf("#   got [%zu, %zu)\n", s.model.start, s.model.end);
        }

        or_is_int(s.model.escaped, t->model_escaped, "spans: %s: escaped",
                  t->name);

        if (t->model != NULL) {
            n = or_json_string_decode(t->doc + s.model.start,
                                      s.model.end - s.model.start, buf);
            buf[n < 0 ? 0 : n] = '\0';

            or_ok(n == (long) strlen(t->model)
                  && memcmp(buf, t->model, n) == 0,
                  "spans: %s: model decodes to '%s'", t->name, t->model);
        }

        or_is_str(or_json_type_name(s.stream.type),
                  or_json_type_name(t->stream_type),
                  "spans: %s: stream type", t->name);
        or_ok(s.stream.start == t->stream_start
              && s.stream.end == t->stream_end,
              "spans: %s: stream at [%zu, %zu)", t->name, t->stream_start,
              t->stream_end);

        if (s.stream.start != t->stream_start
            || s.stream.end != t->stream_end)
        {
            printf("#   got [%zu, %zu)\n", s.stream.start, s.stream.end);
        }
    }
}


static void
tj_depth(void)
{
    size_t          i, n;
    char           *b;
    or_json_scan_t  s;

    b = malloc(6 * OR_JSON_MAX_DEPTH + 64);
    if (b == NULL) {
        or_ok(0, "depth: malloc");
        return;
    }

    /* OR_JSON_MAX_DEPTH arrays, the innermost holding an object */

    n = 0;

    for (i = 0; i < OR_JSON_MAX_DEPTH - 1; i++) {
        b[n++] = '[';
    }

    memcpy(b + n, "{\"a\":1}", 7);
    n += 7;

    for (i = 0; i < OR_JSON_MAX_DEPTH - 1; i++) {
        b[n++] = ']';
    }

    or_is_int(or_json_scan(b, n, &s), OR_JSON_NOT_OBJECT,
              "depth: %d levels are fine", OR_JSON_MAX_DEPTH);

    /* one more */

    n = 0;

    for (i = 0; i < OR_JSON_MAX_DEPTH + 1; i++) {
        b[n++] = '[';
    }

    for (i = 0; i < OR_JSON_MAX_DEPTH + 1; i++) {
        b[n++] = ']';
    }

    or_is_int(or_json_scan(b, n, &s), OR_JSON_TOO_DEEP,
              "depth: %d levels are too deep", OR_JSON_MAX_DEPTH + 1);
    or_is_int(s.error_at, OR_JSON_MAX_DEPTH,
              "depth: error_at is the bracket one level too deep");
    or_is_str(s.error, "nesting too deep", "depth: error");

    /* objects in a body, the model found before the deep member */

    n = 0;
    memcpy(b, "{\"model\":\"m\",\"x\":", 17);
    n = 17;

    for (i = 0; i < OR_JSON_MAX_DEPTH; i++) {
        memcpy(b + n, "{\"a\":", 5);
        n += 5;
    }

    or_is_int(or_json_scan(b, n, &s), OR_JSON_TOO_DEEP,
              "depth: nested objects in a body are too deep");
    or_is_int(s.error_at, 17 + 5 * (OR_JSON_MAX_DEPTH - 1),
              "depth: error_at in nested objects");
    or_ok(s.model.type == OR_JSON_STRING && s.model.start == 9,
          "depth: the model before it is reported");

    /* the stack distinguishes objects from arrays at every level */

    n = 0;

    for (i = 0; i < 100; i++) {
        memcpy(b + n, (i & 1) ? "[" : "{\"k\":", (i & 1) ? 1 : 5);
        n += (i & 1) ? 1 : 5;
    }

    for (i = 100; i-- > 0; /* void */) {
        b[n++] = (i & 1) ? ']' : '}';
    }

    or_is_int(or_json_scan(b, n, &s), OR_JSON_OK,
              "depth: objects and arrays alternating, 100 levels");

    b[n - 50] = (b[n - 50] == ']') ? '}' : ']';

    or_is_int(or_json_scan(b, n, &s), OR_JSON_SYNTAX,
              "depth: one closing bracket swapped");
    or_is_int(s.error_at, n - 50, "depth: error_at the swapped bracket");

    free(b);
}


typedef struct {
    const char  *span;
    size_t       span_len;
    const char  *decoded;
    long         decoded_len;
    const char  *name;
} tj_decode_t;


static const tj_decode_t  tj_decodes[] = {
    { TJ("\"\""), TJ(""), "empty" },
    { TJ("\"plain\""), TJ("plain"), "plain" },
    { TJ("\"caf\\u00e9\""), TJ("caf\xc3\xa9"), "\\u00e9" },
    { TJ("\"\\u00E9\\u0041\""), TJ("\xc3\xa9" "A"), "upper-case hex" },
    { TJ("\"\\u20ac\""), TJ("\xe2\x82\xac"), "a 3-byte code point" },
    { TJ("\"\\uD83D\\uDE00\""), TJ("\xf0\x9f\x98\x80"), "a surrogate pair" },
    { TJ("\"\\udbff\\udfff\""), TJ("\xf4\x8f\xbf\xbf"), "U+10FFFF" },
    { TJ("\"\\uD800\""), TJ("\xef\xbf\xbd"), "a lone high surrogate" },
    { TJ("\"\\uDC00x\""), TJ("\xef\xbf\xbd" "x"), "a lone low surrogate" },
    { TJ("\"\\uD800\\u0041\""), TJ("\xef\xbf\xbd" "A"),
      "a high surrogate before a plain escape" },
    { TJ("\"\\uD800\\uD800\\uDC00\""), TJ("\xef\xbf\xbd\xf0\x90\x80\x80"),
      "a high surrogate before a pair" },
    { TJ("\"a\\u0000b\""), TJ("a\0b"), "\\u0000" },
    { TJ("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\""), TJ("\"\\/\b\f\n\r\t"),
      "short escapes" },
    { TJ("\"\xe6\x97\xa5\""), TJ("\xe6\x97\xa5"), "raw UTF-8" },
    { TJ("abc"), NULL, -1, "no quotes" },
    { TJ("\""), NULL, -1, "a lone quote" },
    { TJ("\"abc"), NULL, -1, "no closing quote" },
    { TJ("\"a\\\""), NULL, -1, "an escaped closing quote" },
    { TJ("\"a\"b\""), NULL, -1, "a raw quote inside" },
    { TJ("\"\\x\""), NULL, -1, "an invalid escape" },
    { TJ("\"\\u12\""), NULL, -1, "a short \\u escape" },
    { TJ("\"\\u12g4\""), NULL, -1, "a bad hex digit" },
    { TJ("\"a\nb\""), NULL, -1, "a raw control character" },
    { NULL, 0, NULL, 0, NULL }
};


static void
tj_decode(void)
{
    long                n;
    char                buf[64];
    const tj_decode_t  *t;

    for (t = tj_decodes; t->span != NULL; t++) {
        memset(buf, 0x55, sizeof(buf));
        n = or_json_string_decode(t->span, t->span_len, buf);

        or_is_int(n, t->decoded_len, "decode: %s: length", t->name);

        if (t->decoded != NULL) {
            or_ok(n == t->decoded_len && memcmp(buf, t->decoded, n) == 0,
                  "decode: %s: bytes", t->name);
            or_ok(n <= (long) t->span_len - 2 && buf[n] == 0x55,
                  "decode: %s: fits in the span", t->name);
        }
    }

    or_is_int(or_json_string_decode(NULL, 0, buf), -1, "decode: NULL");
}


typedef struct {
    const char  *raw;
    size_t       raw_len;
    const char  *quoted;
    size_t       quoted_len;
    const char  *name;
} tj_quote_t;


static const tj_quote_t  tj_quotes[] = {
    { TJ(""), TJ("\"\""), "empty" },
    { TJ("gpt-4o"), TJ("\"gpt-4o\""), "plain" },
    { TJ("a\"b\\c/d"), TJ("\"a\\\"b\\\\c/d\""), "quote and backslash" },
    { TJ("\b\f\n\r\t"), TJ("\"\\b\\f\\n\\r\\t\""), "short forms" },
    { TJ("\0\x01\x1f\x7f"), TJ("\"\\u0000\\u0001\\u001f\x7f\""),
      "other control characters" },
    { TJ("caf\xc3\xa9 \xf0\x9f\x98\x80"),
      TJ("\"caf\xc3\xa9 \xf0\x9f\x98\x80\""), "UTF-8 stays as it is" },
    { NULL, 0, NULL, 0, NULL }
};


static void
tj_quote(void)
{
    int                i, c;
    long               n;
    char               raw[256], q[256 * 6 + 2], d[256 * 6 + 2], *e;
    size_t             len;
    or_json_scan_t     s;
    const tj_quote_t  *t;

    for (t = tj_quotes; t->raw != NULL; t++) {
        len = or_json_quoted_len(t->raw, t->raw_len);
        e = or_json_quote(q, t->raw, t->raw_len);

        or_is_int(len, t->quoted_len, "quote: %s: length", t->name);
        or_ok((size_t) (e - q) == len && memcmp(q, t->quoted, len) == 0,
              "quote: %s: bytes", t->name);

        n = or_json_string_decode(q, len, d);
        or_ok(n == (long) t->raw_len && memcmp(d, t->raw, n) == 0,
              "quote: %s: decodes back", t->name);
    }

    /* every byte but those of UTF-8 sequences: a valid JSON string */

    for (c = 0, i = 0; c < 0x80; c++) {
        raw[i++] = (char) c;
    }

    len = or_json_quoted_len(raw, i);
    e = or_json_quote(q, raw, i);

    or_ok((size_t) (e - q) == len, "quote: bytes 0-127: length");
    or_is_int(or_json_scan(q, len, &s), OR_JSON_NOT_OBJECT,
              "quote: bytes 0-127: a valid JSON string");

    n = or_json_string_decode(q, len, d);
    or_ok(n == i && memcmp(d, raw, i) == 0,
          "quote: bytes 0-127: decode round trip");

    /* and a model spliced into a body */

    len = or_json_quoted_len("new \"m\"", 7);
    memcpy(d, "{\"model\":", 9);
    e = or_json_quote(d + 9, "new \"m\"", 7);
    *e++ = '}';

    or_is_int(or_json_scan(d, e - d, &s), OR_JSON_OK,
              "quote: a spliced model is a valid body");
    or_ok(s.model.start == 9 && s.model.end == 9 + len && s.model.escaped,
          "quote: the spliced model's span");
}


static void
tj_agent_body(void)
{
    int             ok;
    long            n;
    char            buf[16];
    size_t          len, i;
    or_json_scan_t  s;

    len = sizeof(tj_agent) - 1;

    or_is_int(len, 9994, "agent body: 9994 bytes");
    or_is_int(or_json_scan(tj_agent, len, &s), OR_JSON_OK,
              "agent body: ok");
    or_ok(s.model.type == OR_JSON_STRING && s.model.start == 10
          && s.model.end == 17 && !s.model.escaped,
          "agent body: model at [10, 17)");

    n = or_json_string_decode(tj_agent + s.model.start,
                              s.model.end - s.model.start, buf);
    or_ok(n == 5 && memcmp(buf, "smart", 5) == 0,
          "agent body: model is smart");
    or_ok(s.stream.type == OR_JSON_TRUE && s.stream.start == len - 5
          && s.stream.end == len - 1,
          "agent body: stream true, the last member");

    /* every proper prefix is cut short exactly at its end */

    ok = 1;

    for (i = 1; i < len; i++) {
        if (or_json_scan(tj_agent, i, &s) != OR_JSON_SYNTAX
            || s.error_at != i)
        {
            printf("#   prefix %zu: %s at %zu (%s)\n", i,
                   or_json_rc_name(or_json_scan(tj_agent, i, &s)),
                   s.error_at, s.error);
            ok = 0;
            break;
        }
    }

    or_ok(ok, "agent body: every prefix is a syntax error at its end");
}


static void
tj_names(void)
{
    or_is_str(or_json_rc_name(OR_JSON_OK), "ok", "names: ok");
    or_is_str(or_json_rc_name(OR_JSON_EMPTY), "empty", "names: empty");
    or_is_str(or_json_rc_name(OR_JSON_SYNTAX), "syntax", "names: syntax");
    or_is_str(or_json_rc_name(OR_JSON_NOT_OBJECT), "not_object",
              "names: not_object");
    or_is_str(or_json_rc_name(OR_JSON_DUP_MODEL), "dup_model",
              "names: dup_model");
    or_is_str(or_json_rc_name(OR_JSON_TOO_DEEP), "too_deep",
              "names: too_deep");
    or_is_str(or_json_rc_name(OR_JSON_CASE_VARIANT), "case_variant",
              "names: case_variant");
    or_is_str(or_json_rc_name((or_json_rc_e) 99), "unknown",
              "names: out of range");
    or_is_str(or_json_type_name(OR_JSON_ARRAY), "array", "names: array");
}


/*
 * UTF-8 inside long strings: every sequence length, valid and broken, at
 * every offset of a 32-byte block (the vector check works by blocks, the
 * error is then found byte by byte), and cut by a block's end.
 */

static void
tj_utf8_blocks(void)
{
    size_t          i, j, len, at;
    char            doc[256];
    or_json_scan_t  s;

    static const struct {
        const char  *seq;
        size_t       len;
        int          valid;
        size_t       bad;       /* offset of the error in seq */
    } seqs[] = {
        { "\xc3\xa9", 2, 1, 0 },
        { "\xe2\x80\x94", 3, 1, 0 },
        { "\xf0\x9f\x98\x80", 4, 1, 0 },
        { "\xef\xbf\xbf", 3, 1, 0 },
        { "\xf4\x8f\xbf\xbf", 4, 1, 0 },
        { "\xc3", 1, 0, 1 },                /* cut by the 'a' after it */
        { "\xe2\x80", 2, 0, 2 },
        { "\xf0\x9f\x98", 3, 0, 3 },
        { "\x80", 1, 0, 0 },
        { "\xc0\x80", 2, 0, 0 },
        { "\xe0\x80\x80", 3, 0, 1 },
        { "\xed\xa0\x80", 3, 0, 1 },
        { "\xf4\x90\x80\x80", 4, 0, 1 },
        { "\xf5\x80\x80\x80", 4, 0, 0 },
        { "\xc3\xa9\xa9", 3, 0, 2 },        /* one continuation too many */
        { "\xff", 1, 0, 0 },
    };

    for (i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
        for (j = 0; j < 70; j++) {
            /* {"content":"aaa...<seq>aaa..."} */
            len = 0;
            memcpy(doc, "{\"content\":\"", 12);
            len = 12;
            memset(doc + len, 'a', j);
            len += j;
            at = len;
            memcpy(doc + len, seqs[i].seq, seqs[i].len);
            len += seqs[i].len;
            memset(doc + len, 'a', 80);
            len += 80;
            memcpy(doc + len, "\"}", 2);
            len += 2;

            if (seqs[i].valid) {
                or_is_int(or_json_scan(doc, len, &s), OR_JSON_OK,
                          "utf8 blocks: seq %zu at %zu: valid", i, at);
            } else {
                or_is_int(or_json_scan(doc, len, &s), OR_JSON_SYNTAX,
                          "utf8 blocks: seq %zu at %zu: refused", i, at);
                or_is_int(s.error_at, at + seqs[i].bad,
                          "utf8 blocks: seq %zu at %zu: where", i, at);
                or_is_str(s.error, "invalid UTF-8",
                          "utf8 blocks: seq %zu at %zu: why", i, at);
            }
        }
    }

    /* a sequence cut by the end of input: the string is unterminated */

    memcpy(doc, "{\"content\":\"", 12);
    memset(doc + 12, 'a', 40);
    memcpy(doc + 52, "\xe2\x80", 2);

    or_is_int(or_json_scan(doc, 54, &s), OR_JSON_SYNTAX,
              "utf8 blocks: cut by the end: refused");
    or_is_int(s.error_at, 54, "utf8 blocks: cut by the end: where");
    or_is_str(s.error, "unterminated string",
              "utf8 blocks: cut by the end: why");

    /*
     * a string's UTF-8 is checked from its first block with a byte >=
     * 0x80: a valid character early in a long string, the error 300
     * bytes on (the vector validator, then the exact place)
     */

    memcpy(doc, "{\"content\":\"\xc3\xa9", 14);
    memset(doc + 14, 'a', 200);
    memcpy(doc + 214, "\xe2\x28\xa1\"}", 5);

    or_is_int(or_json_scan(doc, 219, &s), OR_JSON_SYNTAX,
              "utf8 strings: an error far from the first character");
    or_is_int(s.error_at, 215, "utf8 strings: ... where");

    /* a character in the next string, in the same block: no error */

    static const char  next[] = "{\"a\":\"x\",\"b\":\"\xc3\xa9\",\"model\":\"m\"}";

    or_is_int(or_json_scan(next, sizeof(next) - 1, &s), OR_JSON_OK,
              "utf8 strings: a character in the string after");

    /* the first error wins: a control byte, then a bad byte; and back */

    static const char  ctl[] = "{\"a\":\"\xc3\xa9\x01\xff\"}";
    static const char  bad[] = "{\"a\":\"\xc3\xa9\xff\x01\"}";

    or_is_int(or_json_scan(ctl, sizeof(ctl) - 1, &s), OR_JSON_SYNTAX,
              "utf8 strings: control byte first: refused");
    or_is_str(s.error, "control character in string",
              "utf8 strings: control byte first: why");
    or_is_int(or_json_scan(bad, sizeof(bad) - 1, &s), OR_JSON_SYNTAX,
              "utf8 strings: bad byte first: refused");
    or_is_str(s.error, "invalid UTF-8", "utf8 strings: bad byte first: why");
    or_is_int(s.error_at, 8, "utf8 strings: bad byte first: where");

    /* a model span before the error is kept, one after it is not */

    static const char  cut[] =
        "{\"model\":\"m\",\"content\":\"\xc3\",\"stream\":true}";

    or_is_int(or_json_scan(cut, sizeof(cut) - 1, &s), OR_JSON_SYNTAX,
              "utf8 blocks: after the model: refused");
    or_ok(s.model.type == OR_JSON_STRING && s.stream.type == OR_JSON_ABSENT,
          "utf8 blocks: the model before the error is reported, not the "
          "stream after it");
}


/* R-TOOL-3: the elements of the top-level "tools" array */

static void
tj_tools(void)
{
    size_t          i;
    or_json_scan_t  s;

    static const struct {
        const char      *doc;
        size_t           count;
        or_json_type_e   type;
        or_json_rc_e     rc;
        const char      *name;
    } cases[] = {
        { "{\"model\":\"m\"}", 0, OR_JSON_ABSENT, OR_JSON_OK, "no tools" },
        { "{\"tools\":[]}", 0, OR_JSON_ARRAY, OR_JSON_OK, "empty array" },
        { "{\"tools\":[{\"type\":\"function\"}]}", 1, OR_JSON_ARRAY,
          OR_JSON_OK, "one tool" },
        { "{\"tools\":[{\"a\":[1,2,3]},{\"b\":{\"c\":[4]}},3,\"x\",null,"
          "[5,6]]}", 6, OR_JSON_ARRAY, OR_JSON_OK,
          "nested arrays and objects count once" },
        { "{\"x\":[1,2],\"tools\":[1,2,3],\"y\":[4,5,6,7]}", 3,
          OR_JSON_ARRAY, OR_JSON_OK, "other arrays do not count" },
        { "{\"tools\":[1,2],\"tools\":[1,2,3,4]}", 4, OR_JSON_ARRAY,
          OR_JSON_OK, "the last tools counts" },
        { "{\"tools\":[1,2],\"tools\":{\"a\":[1]}}", 0, OR_JSON_OBJECT,
          OR_JSON_OK, "a later non-array tools counts 0" },
        { "{\"tools\":7}", 0, OR_JSON_NUMBER, OR_JSON_OK, "a number" },
        { "{\"t\\u006fols\":[1,2]}", 2, OR_JSON_ARRAY, OR_JSON_OK,
          "an escaped key" },
        { "{\"m\":{\"tools\":[1,2]}}", 0, OR_JSON_ABSENT, OR_JSON_OK,
          "a nested tools is not the request's" },
        { "[{\"tools\":[1,2]}]", 0, OR_JSON_ABSENT, OR_JSON_NOT_OBJECT,
          "not an object" },
        { "{\"tools\": [ 1 , [ ] , { } ] }", 3, OR_JSON_ARRAY, OR_JSON_OK,
          "whitespace" },
        { "{\"model\":\"a\",\"model\":\"b\",\"tools\":[1]}", 1,
          OR_JSON_ARRAY, OR_JSON_DUP_MODEL, "counted with a duplicate model" },
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(or_json_scan(cases[i].doc, strlen(cases[i].doc), &s),
                  cases[i].rc, "tools: %s: rc", cases[i].name);
        or_is_int(s.tools_count, cases[i].count, "tools: %s: count",
                  cases[i].name);
        or_is_int(s.tools.type, cases[i].type, "tools: %s: type",
                  cases[i].name);
    }
}


int
main(void)
{
    tj_docs();
    tj_spans();
    tj_depth();
    tj_decode();
    tj_quote();
    tj_agent_body();
    tj_names();
    tj_utf8_blocks();
    tj_tools();

    return or_done();
}
