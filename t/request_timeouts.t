#!/usr/bin/perl

# R-CONC-2: request_queue.execution_max_wait_ms bounds an attempt until its
# response header: 504 RATE_LIMIT_EXECUTION_TIMEOUT; a stream that has
# started is not cut.  R-REQ-4: the request budget (request.budget_ms)
# bounds all attempts together: 504 request_budget_exceeded.  A timeout
# after the provider got a non-streamed request is not re-sent to the next
# connection unless omniroute_resend_after_timeout is on.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;

$ENV{RATE_LIMIT_EXECUTION_MAX_WAIT_MS} = 1500;
$ENV{OMNIROUTE_REQUEST_BUDGET_MS} = 4000;

my $t = OmniTest->new;
my $m = $t->mock('p');

my %keys = (slow => 'delay=3000', hang => 'hang', fast => '', sse => 'sse=2',
            long => 'sse=4,gap=600');

for my $k (keys %keys) {
    $t->write_file("key-$k", "sk-$k" . ($keys{$k} ? "~$keys{$k}" : '') . "\n");
}

$t->params_with('params-rt', proxy_read_timeout => '700ms');

my $main = "env RATE_LIMIT_EXECUTION_MAX_WAIT_MS;\n"
         . "env OMNIROUTE_REQUEST_BUDGET_MS;";

$t->config(<<'EOF', main => $main);
    omniroute_zone zone=omniroute:1m;

    omniroute_provider one url=http://127.0.0.1:%%PORT_mock_p%%/one;
    omniroute_provider two url=http://127.0.0.1:%%PORT_mock_p%%/two;
    omniroute_provider three url=http://127.0.0.1:%%PORT_mock_p%%/three;
    omniroute_provider slow url=http://127.0.0.1:%%PORT_mock_p%%/slow;
    omniroute_provider fast url=http://127.0.0.1:%%PORT_mock_p%%/fast;
    omniroute_provider sse url=http://127.0.0.1:%%PORT_mock_p%%/sse;
    omniroute_provider hang url=http://127.0.0.1:%%PORT_mock_p%%/hang;
    omniroute_provider long url=http://127.0.0.1:%%PORT_mock_p%%/long;

    omniroute_connection o1 provider=one key_file=%%TESTDIR%%/key-slow;
    omniroute_connection o2 provider=two key_file=%%TESTDIR%%/key-slow;
    omniroute_connection o3 provider=three key_file=%%TESTDIR%%/key-slow;
    omniroute_connection s1 provider=slow key_file=%%TESTDIR%%/key-slow
                         priority=1;
    omniroute_connection s2 provider=slow key_file=%%TESTDIR%%/key-slow
                         priority=2;
    omniroute_connection s3 provider=slow key_file=%%TESTDIR%%/key-slow
                         priority=3;
    omniroute_connection f1 provider=fast key_file=%%TESTDIR%%/key-fast;
    omniroute_connection e1 provider=sse key_file=%%TESTDIR%%/key-sse;
    omniroute_connection h1 provider=hang key_file=%%TESTDIR%%/key-hang;
    omniroute_connection h2 provider=hang key_file=%%TESTDIR%%/key-fast;
    omniroute_connection l1 provider=long key_file=%%TESTDIR%%/key-long;

    omniroute_combo chain two/m fast/m;
    omniroute_combo streamy three/m sse/m;
    omniroute_combo slowchain slow/m fast/m;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /resend/ {
            omniroute_pass;
            omniroute_resend_after_timeout on;
        }

        location /rt/ {
            omniroute_pass /_rt;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /_rt {
            internal;
            include %%TESTDIR%%/params-rt;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub ask {
    my ($path, $body) = @_;
    my $t0 = time;
    my $r = $t->post($gw, $path, $body);
    $r->{took} = time - $t0;
    return $r;
}

sub seen {
    my ($prefix) = @_;
    return scalar grep { $_->{path} =~ m{^/$prefix/} } @{$m->requests};
}

# a provider slower than execution_max_wait_ms
my $r = ask('/v1/chat/completions', { model => 'one/m' });
my $doc = OmniTest::json($r) || {};
is($r->{status}, 504, 'R-CONC-2 slower than execution_max_wait_ms: 504');
is($doc->{error}{code}, 'RATE_LIMIT_EXECUTION_TIMEOUT',
   'R-CONC-2 code RATE_LIMIT_EXECUTION_TIMEOUT');
ok($r->{took} > 1.3 && $r->{took} < 2.5, 'R-CONC-2 after 1.5 s')
    or diag("took $r->{took} s");
is($r->{headers}{'x-omniroute-connection'}, 'o1', 'naming the connection');
like($t->error_log, qr/attempt on "o1" ended after \d+ ms: execution_max_wait/,
     'the cut is logged');

# the provider got the request: not sent again to the next connection
$r = ask('/v1/chat/completions', { model => 'chain' });
is($r->{status}, 504, 'a cut non-streamed attempt is not re-sent: 504');
is(OmniTest::json($r)->{error}{code}, 'RATE_LIMIT_EXECUTION_TIMEOUT',
   'RATE_LIMIT_EXECUTION_TIMEOUT');
is(seen('fast'), 0, 'the next connection was not asked');

# ... unless omniroute_resend_after_timeout is on (o2 cools down after its
# timeout, so wait for that first)
sleep(3.2);
$r = ask('/resend/chat/completions', { model => 'chain' });
is($r->{status}, 200, 'omniroute_resend_after_timeout on: the next one');
is($r->{headers}{'x-omniroute-attempts'}, '2', 'after two attempts');
is($r->{headers}{'x-omniroute-connection'}, 'f1', 'answered by f1');

# a stream that has no header yet is sent to the next connection
$r = ask('/v1/chat/completions', { model => 'streamy', stream => JSON::PP::true });
is($r->{status}, 200, 'a stream cut before its header falls over');
is($r->{headers}{'x-omniroute-connection'}, 'e1', 'to the streaming one');
like($r->{body}, qr/data: \[DONE\]/, 'whole stream');

# a read timeout (proxy_read_timeout 700ms) after the request was sent:
# 504 upstream_timeout, not re-sent
$m->clear;
$r = ask('/rt/chat/completions', { model => 'hang/m' });
is($r->{status}, 504, 'read timeout, resend off: 504');
is(OmniTest::json($r)->{error}{code}, 'upstream_timeout',
   'code upstream_timeout');
is(seen('hang'), 1, 'not re-sent to h2');

# the request budget (4 s) cuts a chain of slow attempts (1.5 s each)
$m->clear;
$r = ask('/resend/chat/completions', { model => 'slowchain' });
$doc = OmniTest::json($r) || {};
is($r->{status}, 504, 'R-REQ-4 a chain of slow attempts: 504');
is($doc->{error}{code}, 'request_budget_exceeded',
   'R-REQ-4 code request_budget_exceeded');
is($r->{headers}{'x-omniroute-attempts'}, '3', 'R-REQ-4 after three attempts');
ok($r->{took} > 3.7 && $r->{took} < 5, 'R-REQ-4 within the 4 s budget')
    or diag("took $r->{took} s");
is(seen('fast'), 0, 'R-REQ-4 no attempt after the budget');

# a stream that has started is not cut by execution_max_wait_ms
$r = ask('/v1/chat/completions', { model => 'long/m', stream => JSON::PP::true });
is($r->{status}, 200, 'R-CONC-2 a stream longer than the limit: 200');
is(scalar(() = $r->{body} =~ /"id":"chunk-\d"/g), 4,
   'R-CONC-2 with every event');
ok($r->{took} > 2.3, 'R-CONC-2 for the whole 2.4 s') or diag("took $r->{took} s");

$t->done;
done_testing;
