#!/usr/bin/perl

# Responses API "background": true (issue 16, item 4): forwarded as a
# synchronous request, the member removed by the body splice (the rest of
# the client's bytes unchanged, the JSON still valid whatever the
# member's place), X-OmniRoute-Warning: background-forced-synchronous on
# the answer and a warn line in the error log.  "background": false, and
# "background" outside the Responses path, go through as they are; two
# "background" members are refused.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

$t->write_file('key-r', "sk-r~ok\n");
$t->write_file('key-s', "sk-s~fixture=openai-responses\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider pr url=http://127.0.0.1:%%PORT_mock_p%%/r;
    omniroute_provider ps url=http://127.0.0.1:%%PORT_mock_p%%/s;
    omniroute_connection cr provider=pr key_file=%%TESTDIR%%/key-r;
    omniroute_connection cs provider=ps key_file=%%TESTDIR%%/key-s;
    omniroute_model mr pr/up-r;
    omniroute_model ms ps/up-s;

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
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');
my $WARN = 'background-forced-synchronous';

sub send_body {
    my ($path, $body) = @_;
    $m->clear;
    my $r = $t->post($gw, $path, $body);
    my $reqs = $m->requests;
    return ($r, $reqs->[0] ? $reqs->[0]{body} : undef, scalar @$reqs);
}

my @cases = (
    [ '{"model":"mr","background":true,"input":"hi"}',
      '{"model":"up-r","input":"hi"}', 'in the middle' ],
    [ '{"background":true,"model":"mr","input":"hi"}',
      '{"model":"up-r","input":"hi"}', 'first' ],
    [ '{"model":"mr","input":"hi","background":true}',
      '{"model":"up-r","input":"hi"}', 'last' ],
    [ "{\n  \"model\": \"mr\",\n  \"input\": \"hi\",\n"
      . "  \"background\": true\n}",
      "{\n  \"model\": \"up-r\",\n  \"input\": \"hi\"\n}",
      'pretty-printed, last' ],
    [ '{"model":"mr" , "background" : true , "store":false}',
      '{"model":"up-r" , "store":false}', 'spaced' ],
    [ '{"model":"mr","backgr\u006fund":true}', '{"model":"up-r"}',
      'an escaped key' ],
);

for my $c (@cases) {
    my ($body, $want, $name) = @$c;
    my ($r, $sent) = send_body('/v1/responses', $body);

    is($r->{status}, 200, "$name: answered");
    is($sent, $want, "$name: the provider got it without background");
    ok(eval { decode_json($sent); 1 }, "$name: valid JSON");
    is($r->{headers}{'x-omniroute-warning'}, $WARN,
       "$name: X-OmniRoute-Warning");
}

# a realistic body: only the member is gone

SKIP: {
    my $gen = "$OmniTest::ROOT/../shared/fixtures/agent_body.py";
    OmniTest::skip_without('fixtures not found', 3) unless -f $gen;

    my $agent = `python3 $gen 64 mr`;
    OmniTest::skip_without('python3 could not run the generator', 3)
        unless $? == 0;

    (my $body = $agent) =~ s/"temperature": /"background": true, "temperature": /
        or die 'no temperature';
    (my $want = $agent) =~ s/"model": "mr"/"model": "up-r"/;

    my ($r, $sent) = send_body('/v1/responses', $body);
    is($r->{status}, 200, 'agent body: answered');
    ok(defined $sent && $sent eq $want,
       'agent body: the client\'s bytes but the member (and the model)');
    is($r->{headers}{'x-omniroute-warning'}, $WARN, 'agent body: warned');
}

# a streamed background request: the stream, and the warning header
my ($r, $sent) = send_body('/v1/responses',
                           '{"model":"ms","stream":true,"background":true}');
is($r->{status}, 200, 'streamed: answered');
is($sent, '{"model":"up-s","stream":true}', 'streamed: without background');
like($r->{body}, qr/response\.completed/, 'streamed: the whole stream');
is($r->{headers}{'x-omniroute-warning'}, $WARN, 'streamed: warned');

# what goes through as it is

($r, $sent) = send_body('/v1/responses',
                        '{"model":"mr","background":false}');
is($sent, '{"model":"up-r","background":false}', 'background false: kept');
ok(!exists $r->{headers}{'x-omniroute-warning'}, 'background false: no '
   . 'warning');

($r, $sent) = send_body('/v1/chat/completions',
                        '{"model":"mr","background":true}');
is($sent, '{"model":"up-r","background":true}',
   'not the Responses path: kept');
ok(!exists $r->{headers}{'x-omniroute-warning'},
   'not the Responses path: no warning');

# bad input

my $n;
($r, $sent, $n) = send_body('/v1/responses',
                            '{"model":"mr","background":true,'
                            . '"background":false}');
is($r->{status}, 400, 'two background members: 400');
is(eval { decode_json($r->{body})->{error}{code} }, 'invalid_background',
   'two background members: invalid_background');
is($n, 0, 'two background members: nothing sent');

my $log = $t->error_log;
my @warn = ($log =~ /\[warn\].*"background": true removed from a Responses API request/g);
is(scalar @warn, scalar(@cases) + 1
   + ((-f "$OmniTest::ROOT/../shared/fixtures/agent_body.py") ? 1 : 0),
   'a warn line for each one');

$t->done;
done_testing;
