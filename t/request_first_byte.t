#!/usr/bin/perl

# Issue 25, finding 8: a silent non-streamed provider (it takes the
# request and never answers) no longer holds the client for
# execution_max_wait_ms while a healthy target waits: the provider's
# first_byte= deadline (request.first_byte_timeout_ms in the admin API)
# ends the attempt and the combo falls over, also with
# omniroute_resend_after_timeout off.  The last candidate is never cut by
# it; the deadline is settable at runtime; 2 workers.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP;
use Test::More;
use Time::HiRes qw(time);
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $TOKEN = 'firstbyte-0123456789-abcd';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-silent', "sk-silent~hang\n");
$t->write_file('key-quiet', "sk-quiet~hang\n");
$t->write_file('key-ok', "sk-ok\n");
$t->write_file('key-lone', "sk-lone~hang\n");

$t->config(<<'EOF2', main => "env OMNI_TEST_API_TOKEN;");
    omniroute_zone zone=omniroute:1m;

    omniroute_provider silent url=http://127.0.0.1:%%PORT_mock_p%%/silent
                       first_byte=1s;
    omniroute_provider quiet url=http://127.0.0.1:%%PORT_mock_p%%/quiet;
    omniroute_provider ok url=http://127.0.0.1:%%PORT_mock_p%%/ok;
    omniroute_provider lone url=http://127.0.0.1:%%PORT_mock_p%%/lone
                       first_byte=1s;

    omniroute_connection silent provider=silent
                         key_file=%%TESTDIR%%/key-silent;
    omniroute_connection quiet provider=quiet key_file=%%TESTDIR%%/key-quiet;
    omniroute_connection ok provider=ok key_file=%%TESTDIR%%/key-ok;
    omniroute_connection lone provider=lone key_file=%%TESTDIR%%/key-lone;

    omniroute_combo chat silent/m ok/m;
    omniroute_combo chat2 quiet/m ok/m;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

        location /v1/ {
            omniroute_pass;
            omniroute_attempt_trail on;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /api/ {
            omniroute_api;
        }
    }
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub api {
    my ($method, $path, $body) = @_;
    my %h = (Authorization => "Bearer $TOKEN");
    if (defined $body) {
        $body = encode_json($body);
        $h{'Content-Type'} = 'application/json';
    }
    my $r = $t->http($gw, OmniTest::request_text($method, $path, $body, %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub ask {
    my ($model) = @_;
    my $t0 = time;
    my $r = $t->post($gw, '/v1/chat/completions',
                     { model => $model,
                       messages => [{ role => 'user', content => 'hi' }] });
    $r->{took} = time - $t0;
    return $r;
}

# the deadline is in the settings, from nginx.conf
my $s = api('GET', '/api/resilience')->{json};
is($s->{providers}{silent}{request}{first_byte_timeout_ms}, 1000,
   'first_byte=1s: request.first_byte_timeout_ms');
is($s->{providers}{silent}{sources}{request}{first_byte_timeout_ms}, 'conf',
   '... from nginx.conf');
is($s->{providers}{quiet}{request}{first_byte_timeout_ms}, undef,
   'off by default (null)');

# 1. the silent first target: cut after 1s, the second answers

my $r = ask('chat');
is($r->{status}, 200, 'issue 25: the healthy second target answered')
    or diag("$r->{status} $r->{body}");
is($r->{headers}{'x-omniroute-connection'}, 'ok', '... it was "ok"');
cmp_ok($r->{took}, '>=', 0.9, 'after the first-byte deadline (1s)');
cmp_ok($r->{took}, '<', 5, 'not after execution_max_wait_ms (10 min)')
    or diag($r->{took});
like($r->{headers}{'x-omniroute-trail'} // '',
     qr/^silent;timeout;\d+ms, ok;200;/,
     'the trail: the silent target timed out, then ok');
like($t->error_log, qr/attempt[ ]on[ ]"silent"[ ]ended[ ]after[ ]\d+[ ]ms:[ ]no[ ]response
                       [ ]header[ ]within[ ]its[ ]first_byte[ ]deadline/x,
     'the cut is logged');

my @seen = map { $_->{path} } @{$m->requests};
is_deeply(\@seen, ['/silent/chat/completions', '/ok/chat/completions'],
          'the request was sent to the silent target, then to ok');

# 2. without the deadline the silent target holds the client: set at
#    runtime, it cuts it too

$r = api('PATCH', '/api/resilience', { providers => {
    quiet => { request => { first_byte_timeout_ms => 800 } } } });
is($r->{status}, 200, 'PATCH request.first_byte_timeout_ms: 200')
    or diag($r->{body});
is($r->{json}{providers}{quiet}{sources}{request}{first_byte_timeout_ms},
   'runtime', '... a runtime value');

$r = ask('chat2');
is($r->{status}, 200, 'the runtime deadline: the second target answered');
cmp_ok($r->{took}, '<', 5, '... without waiting for the silent one');

$r = api('PATCH', '/api/resilience', { providers => {
    quiet => { request => { first_byte_timeout_ms => -5 } } } });
is($r->{status}, 400, 'a negative deadline: 400') or diag($r->{body});

# 3. the last candidate is never cut by it (execution_max_wait_ms is its
#    bound): a silent provider with the deadline as the only target

$r = api('PATCH', '/api/resilience',
         { global => { request_queue => { execution_max_wait_ms => 2500 } } });
is($r->{status}, 200, 'execution_max_wait_ms 2.5s');

$r = ask('lone/m');
is($r->{status}, 504, 'the silent last candidate: 504 ...')
    or diag("$r->{status} $r->{body}");
is(OmniTest::json($r)->{error}{code}, 'RATE_LIMIT_EXECUTION_TIMEOUT',
   '... at execution_max_wait_ms, not at its first-byte deadline');
cmp_ok($r->{took}, '>=', 2.3, 'it was given the whole 2.5s');

$t->done;
done_testing;
