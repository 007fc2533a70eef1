#!/usr/bin/perl

# R-NAME-1: what a client names stays data.  A "model" whose JSON escapes
# decode to CR LF, NUL or another control byte, a space, non-ASCII bytes
# or more than 256 bytes is refused 400 invalid_model before any provider
# is called: with proxy_set_header X-Upstream-Model
# $omniroute_upstream_model in the attempt location (a "provider/model"
# name passes its model part upstream) the provider never receives a
# second, smuggled request, and the error log no forged line.  A session
# header is checked the same way (400 invalid_session_id naming it).
# R-NAME-2: a top-level member spelled as one the gateway reads but for
# case ("Model" beside "model", "STREAM", "\u017Ftream") is refused 400
# invalid_member naming it: the provider never sees it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-c1', "sk-c1\n");

$t->config(<<'EOF2');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key-c1;

    omniroute_model cheap p/cheap-upstream;

    log_format names '$omniroute_model|$omniroute_upstream_model';

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
            omniroute_session_affinity 1h;
            access_log %%TESTDIR%%/logs/names.log names;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
            proxy_set_header X-Upstream-Model $omniroute_upstream_model;
        }
    }
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');
my $chat = '/v1/chat/completions';
my $msgs = '"messages":[{"role":"user","content":"hi"}]';

sub refused {
    my ($r, $code, $what, $name) = @_;
    is($r->{status}, 400, "$name: 400");
    my $doc = OmniTest::json($r) || {};
    is($doc->{error}{code}, $code, "$name: $code");
    like($doc->{error}{message} // '', $what, "$name: names it");
    return $doc;
}

###########################################################################
# the model

$m->clear;

# "p/..." passes its model part to the provider, and so to the header
my $smuggle = 'p/x\r\nContent-Length: 0\r\n\r\nGET /smuggled HTTP/1.1\r\n'
              . 'Host: evil\r\nX-Forged: 1';

refused($t->post($gw, $chat, qq({"model":"$smuggle",$msgs})),
        'invalid_model', qr/"model" has a control character at byte 3/,
        'R-NAME-1 CR LF in the model');
refused($t->post($gw, $chat, qq({"model":"cheap\\u0000x",$msgs})),
        'invalid_model', qr/"model" has a control character at byte 5/,
        'R-NAME-1 \\u0000 in the model');
refused($t->post($gw, $chat, qq({"model":"p/x\\u007f",$msgs})),
        'invalid_model', qr/control character/, 'R-NAME-1 DEL');
refused($t->post($gw, $chat, qq({"model":"p/a b",$msgs})),
        'invalid_model', qr/a space or a non-ASCII byte at byte 3/,
        'R-NAME-1 a space');
refused($t->post($gw, $chat, qq({"model":"p/caf\\u00e9",$msgs})),
        'invalid_model', qr/non-ASCII/, 'R-NAME-1 non-ASCII');
refused($t->post($gw, $chat, '{"model":"p/' . ('x' x 255) . qq(",$msgs})),
        'invalid_model', qr/longer than 256 bytes/, 'R-NAME-1 257 bytes');

my $r = $t->post($gw, $chat, '{"model":"p/' . ('x' x 254) . qq(",$msgs}));
is($r->{status}, 200, 'R-NAME-1 256 bytes are fine');

# the one request that may pass
$r = $t->post($gw, $chat, qq({"model":"p/plain-model",$msgs}));
is($r->{status}, 200, 'a plain "provider/model": 200');

my $reqs = $m->requests;
is(scalar @$reqs, 2, 'R-NAME-1 the provider received exactly the two '
   . 'valid requests');
is($reqs->[-1]{headers}{'x-upstream-model'}, 'plain-model',
   'X-Upstream-Model: the upstream model');
ok(!(grep { ($_->{path} // '') =~ /smuggled/
            || exists $_->{headers}{'x-forged'}
            || ($_->{headers}{host} // '') eq 'evil' } @$reqs),
   'R-NAME-1 no smuggled request, no forged header');

###########################################################################
# a session header

$m->clear;

refused($t->post($gw, $chat, { model => 'cheap' },
                 'X-Session-Id' => "s1\x01forged"),
        'invalid_session_id', qr/"X-Session-Id" has a control character/,
        'R-NAME-1 a control byte in X-Session-Id');
refused($t->post($gw, $chat, { model => 'cheap' },
                 'x-codex-session-id' => 'a' x 257),
        'invalid_session_id', qr/"x-codex-session-id" is longer than 256/,
        'R-NAME-1 a session id of 257 bytes');
refused($t->post($gw, $chat, { model => 'cheap' },
                 'X-Session-Id' => "s \xc3\xa9"),
        'invalid_session_id', qr/a space or a non-ASCII byte/,
        'R-NAME-1 a session id with a space');

$r = $t->post($gw, $chat, { model => 'cheap' },
              'X-Session-Id' => 'sess-42:abc');
is($r->{status}, 200, 'a printable session id: 200');
is(scalar @{$m->requests}, 1, 'the provider received that one only');

###########################################################################
# R-NAME-2 case variants of the members the gateway reads

$m->clear;

for my $c (
    [qq({"model":"cheap","Model":"expensive-upstream",$msgs}), 'Model'],
    [qq({"model":"cheap","STREAM":true,$msgs}), 'STREAM'],
    [qq({"Stream_Options":{"include_usage":true},"model":"cheap",$msgs}),
     'Stream_Options'],
    [qq({"model":"cheap","Background":true,$msgs}), 'Background'],
    [qq({"model":"cheap","Tools":[],$msgs}), 'Tools'],
    [qq({"model":"cheap","\\u017Ftream":true,$msgs}), '\\xc5\\xbftream'])
{
    my ($body, $name) = @$c;
    refused($t->post($gw, $chat, $body), 'invalid_member',
            qr/member "\Q$name\E" \(at byte \d+\) that differs only by case/,
            "R-NAME-2 \"$name\"");
}

# "ſtream" sent raw (UTF-8): the answer quotes it escaped
refused($t->post($gw, $chat, qq({"model":"cheap","\xc5\xbftream":true,$msgs})),
        'invalid_member', qr/member "\\xc5\\xbftream"/,
        'R-NAME-2 a raw long s, escaped in the answer');

$r = $t->post($gw, $chat,
              qq({"model":"cheap","metadata":{"Model":"x"},$msgs}));
is($r->{status}, 200, 'R-NAME-2 a nested "Model" is the client\'s own');
is(scalar @{$m->requests}, 1, 'R-NAME-2 the provider received only that');

###########################################################################
# logs

my $log = $t->error_log;
ok($log !~ /^(GET \/smuggled|Host: evil|X-Forged|Content-Length: 0)/m,
   'R-NAME-1 the error log has no forged line');
ok($log !~ /[\x00-\x08\x0b-\x1f\x7f]/, 'R-NAME-1 nor a control byte');

my $names = $t->read_file('logs/names.log');
ok($names !~ /[\x00-\x08\x0b-\x1f\x7f]/ && $names !~ /smuggled/,
   'R-NAME-1 $omniroute_model and $omniroute_upstream_model in the '
   . 'access log: no client control byte');
like($names, qr/^p\/plain-model\|plain-model$/m, '... the valid one logged');

$t->done;

done_testing;
