#!/usr/bin/perl

# Asking Chat Completions streams for their usage (issue 15): with the
# provider's stream_usage=on, a "stream": true request that did not ask
# for usage reaches the provider with "stream_options":{"include_usage":
# true} spliced in (only that member differs from the client's bytes:
# a real 150 KiB agent body); the usage-only chunk of the answer is kept
# from the client, whose stream still ends with [DONE], and its tokens
# are counted.  A client that asked gets the chunk; include_usage false is
# not asking; a provider without the setting gets the body as it was; the
# runtime setting (PATCH) turns it on too.  2 workers.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep);
use OmniTest;
use PromText;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $TOKEN = 'usage-ask-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-on', "sk-on~fixture=openai-chat,split=1\n");
$t->write_file('key-off', "sk-off~fixture=openai-chat\n");
$t->write_file('key-rt', "sk-rt~fixture=openai-chat\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider pon url=http://127.0.0.1:%%PORT_mock_p%%/on
                       stream_usage=on;
    omniroute_provider poff url=http://127.0.0.1:%%PORT_mock_p%%/off;
    omniroute_provider prt url=http://127.0.0.1:%%PORT_mock_p%%/rt;
    omniroute_connection con provider=pon key_file=%%TESTDIR%%/key-on;
    omniroute_connection coff provider=poff key_file=%%TESTDIR%%/key-off;
    omniroute_connection crt provider=prt key_file=%%TESTDIR%%/key-rt;
    omniroute_model mon pon/up-on;
    omniroute_model moff poff/up-off;
    omniroute_model mrt prt/up-rt;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
            client_max_body_size 4m;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /api/ {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }

        location = /metrics {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');

my $ASK = ',"stream_options":{"include_usage":true}';

# the client's bytes and the provider's, compared as bytes
sub same_bytes {
    my ($got, $want, $name) = @_;
    $got //= '';

    if ($got eq $want) {
        pass($name);
        return;
    }

    my $i = 0;
    $i++ while $i < length $got && $i < length $want
               && substr($got, $i, 1) eq substr($want, $i, 1);

    fail($name);
    diag("lengths " . length($got) . " / " . length($want)
         . ", first difference at byte $i: got \""
         . substr($got, $i, 60) . "\", want \"" . substr($want, $i, 60)
         . "\"");
}

sub events {
    my ($body) = @_;
    return grep { /\S/ } split /\r?\n\r?\n/, $body;
}

sub usage_chunks { scalar grep { /"choices":\[\]/ } events($_[0]) }

sub ask {
    my ($model, $body) = @_;
    $m->clear;
    my $r = $t->post($gw, '/v1/chat/completions', $body);
    my $reqs = $m->requests;
    return ($r, $reqs->[0]{body});
}

###########################################################################
# a real agent body that did not ask

SKIP: {
    my $gen = "$OmniTest::ROOT/../shared/fixtures/agent_body.py";
    OmniTest::skip_without('fixtures not found', 8) unless -f $gen;

    my $agent = `python3 $gen 150 mon stream`;
    OmniTest::skip_without('python3 could not run the generator', 8)
        unless $? == 0;

    ok(length $agent > 150 * 1024 && $agent =~ /"stream": true\}$/,
       'an agent body of 150 KiB that streams, stream last');

    my ($r, $sent) = ask('mon', $agent);
    is($r->{status}, 200, 'agent body: 200');

    (my $want = $agent) =~ s/"model": "mon"/"model": "up-on"/;
    $want =~ s/"stream": true\}$/"stream": true$ASK}/;
    same_bytes($sent, $want, 'agent body: only the model and the '
               . 'inserted stream_options differ');

    is(usage_chunks($r->{body}), 0, 'agent body: no usage chunk for the '
       . 'client');
    like($r->{body}, qr/data: \[DONE\]\s*$/, 'agent body: the stream ends '
         . 'with [DONE]');
    like($r->{body}, qr/"finish_reason":"tool_calls"/,
         'agent body: the chunk before the usage passed');
    is(scalar(events($r->{body})), 7, 'agent body: 7 of the 8 events');
    unlike($r->{body}, qr/usage/, 'agent body: no usage at all');
}

###########################################################################
# the shapes of stream_options

my $base = '{"model":"mon","messages":[{"role":"user","content":"hi"}],';

my ($r, $sent) = ask('mon', $base . '"stream":true}');
same_bytes($sent, '{"model":"up-on","messages":[{"role":"user",'
           . '"content":"hi"}],"stream":true' . $ASK . '}',
           'no stream_options: added after "stream"');
is(usage_chunks($r->{body}), 0, 'no stream_options: chunk kept back');

($r, $sent) = ask('mon', $base . '"stream":true,"stream_options":'
                  . '{"include_usage":true}}');
same_bytes($sent, '{"model":"up-on","messages":[{"role":"user",'
           . '"content":"hi"}],"stream":true,"stream_options":'
           . '{"include_usage":true}}', 'asked: the body as it was');
is(usage_chunks($r->{body}), 1, 'asked: the client gets its usage chunk');
like($r->{body}, qr/"prompt_tokens":2095/, 'asked: with its counts');
like($r->{body}, qr/data: \[DONE\]\s*$/, 'asked: [DONE]');

($r, $sent) = ask('mon', $base . '"stream":true,"stream_options":'
                  . '{ "include_usage" : false }}');
same_bytes($sent, '{"model":"up-on","messages":[{"role":"user",'
           . '"content":"hi"}],"stream":true,"stream_options":'
           . '{ "include_usage" : true }}', 'include_usage false: '
           . 'the value replaced');
is(usage_chunks($r->{body}), 0, 'include_usage false is not asking');
like($r->{body}, qr/data: \[DONE\]\s*$/, 'include_usage false: [DONE]');

($r, $sent) = ask('mon', $base . '"stream_options":{"x":1},"stream":true}');
same_bytes($sent, '{"model":"up-on","messages":[{"role":"user",'
           . '"content":"hi"}],"stream_options":{"include_usage":true,'
           . '"x":1},"stream":true}', 'other stream options: merged');

($r, $sent) = ask('mon', $base . '"stream":false}');
same_bytes($sent, '{"model":"up-on","messages":[{"role":"user",'
           . '"content":"hi"}],"stream":false}', 'not a stream: untouched');

($r, $sent) = ask('mon', $base . '"stream":true,"stream_options":"x"}');
same_bytes($sent, '{"model":"up-on","messages":[{"role":"user",'
           . '"content":"hi"}],"stream":true,"stream_options":"x"}',
           'stream_options not an object: left to the provider');

# a provider without the setting: the body as it was, nothing kept back
($r, $sent) = ask('moff', '{"model":"moff","stream":true}');
same_bytes($sent, '{"model":"up-off","stream":true}',
           'setting off: the body as it was');
is(usage_chunks($r->{body}), 1, 'setting off: what the provider sent '
   . 'passes');

###########################################################################
# the runtime setting

sub api {
    my ($method, $path, $body) = @_;
    my %h = (Authorization => "Bearer $TOKEN");
    if (defined $body) {
        $body = encode_json($body);
        $h{'Content-Type'} = 'application/json';
    }
    my $res = $t->http($gw, OmniTest::request_text($method, $path, $body,
                                                   %h));
    $res->{json} = eval { decode_json($res->{body}) };
    return $res;
}

my $s = api('GET', '/api/resilience')->{json};
is_deeply([$s->{providers}{pon}{stream}{include_usage},
           $s->{providers}{pon}{sources}{stream}{include_usage}],
          [JSON::PP::true, 'conf'], 'API: stream.include_usage of pon');
is_deeply([$s->{providers}{prt}{stream}{include_usage},
           $s->{providers}{prt}{sources}{stream}{include_usage}],
          [JSON::PP::false, 'default'], 'API: off by default');

my $p = api('PATCH', '/api/resilience', { providers => {
    prt => { stream => { include_usage => JSON::PP::true } } } });
is($p->{status}, 200, 'PATCH stream.include_usage: 200');

for my $i (1 .. 2) {
    ($r, $sent) = ask('mrt', '{"model":"mrt","stream":true}');
    same_bytes($sent, '{"model":"up-rt","stream":true' . $ASK . '}',
               "runtime on ($i): asked");
    is(usage_chunks($r->{body}), 0, "runtime on ($i): chunk kept back");
}

###########################################################################
# the tokens of the kept-back chunks are counted

sleep(0.3);    # the last request is counted when it is logged
my $text = api("GET", "/metrics")->{body};
PromText::check($t, $text, "metrics");
diag(join "\n", grep { /tokens/ } split /\n/, $text) if $ENV{DIAG};

sub tokens {
    my ($p, $c, $model, $type) = @_;
    my $re = "omniroute_tokens_total\\{provider=\"$p\",connection=\"$c\","
             . "model=\"$model\",type=\"$type\"\\} (\\d+)";
    return $text =~ /^$re$/m ? $1 : undef;
}

# pon: the agent body (if run) and 6 more answers of the fixture's 2095/89/1792
my $n = (-f "$OmniTest::ROOT/../shared/fixtures/agent_body.py") ? 7 : 6;
is(tokens('pon', 'con', 'mon', 'prompt'), 2095 * $n,
   'prompt tokens of the streams, kept back or not');
is(tokens('pon', 'con', 'mon', 'completion'), 89 * $n, 'completion tokens');
is(tokens('pon', 'con', 'mon', 'cached'), 1792 * $n, 'cached tokens');
is(tokens('prt', 'crt', 'mrt', 'prompt'), 2095 * 2, 'runtime: counted');

$t->done;
done_testing;
