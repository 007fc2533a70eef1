#!/usr/bin/perl

# The plan memo and a request planned again after a wait: a queued
# request goes on with the breakers it read before it waited; what it
# finds is not written to the model's memo, so the next requests see the
# breaker as it is now.  1 worker (the memo is the worker's own).
#
# m1 is out of credits (terminal), m2 answers slowly and takes one request
# at a time; m3, a connection of the same provider for another model,
# answers 503.  A holds m2, R queues behind it; meanwhile m3's failures
# open the provider's breaker; A ends and R is planned again.  A fresh
# request then lists m1 as circuit_open (the breaker first), as it would
# with no memo at all.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep);
use OmniTest;

$ENV{RATE_LIMIT_MAX_QUEUE_DEPTH} = 4;
$ENV{RATE_LIMIT_MAX_WAIT_MS} = 5000;

my $t = OmniTest->new(workers => 1);
my $m = $t->mock('p');

$t->write_file('key-m1', "sk-m1~status=402\n");
$t->write_file('key-m2', "sk-m2~delay=1500\n");
$t->write_file('key-m3', "sk-m3~status=503\n");
$t->write_file('key-x1', "sk-x1~status=500\n");

$t->config(<<'EOF2', main => "env RATE_LIMIT_MAX_QUEUE_DEPTH;\nenv RATE_LIMIT_MAX_WAIT_MS;");
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=local breaker_reset=60s cooldown_base=1ms
                       cooldown_max=5ms;
    omniroute_provider other url=http://127.0.0.1:%%PORT_mock_p%%/other
                       kind=apikey;
    omniroute_connection m1 provider=alpha key_file=%%TESTDIR%%/key-m1
                         models=m;
    omniroute_connection m2 provider=alpha key_file=%%TESTDIR%%/key-m2
                         models=m priority=1 max_concurrent=1;
    omniroute_connection m3 provider=alpha key_file=%%TESTDIR%%/key-m3
                         models=bad;
    omniroute_connection x1 provider=other key_file=%%TESTDIR%%/key-x1;

    omniroute_model pool alpha/m;
    omniroute_model bad alpha/bad;
    omniroute_model ot other/z;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF2

$t->run($t->port('gw'));

my $gw = $t->port('gw');
my $body = '{"model":"%s","messages":[{"role":"user","content":"hi"}]}';

sub chat {
    my ($model) = @_;
    my $r = $t->post($gw, '/v1/chat/completions', sprintf($body, $model));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub excluded {
    my ($r) = @_;
    my $e = $r->{json}{diagnostics}{excluded} // [];
    return join(' ', map { "$_->{connection}:$_->{reason}" } @$e);
}

my $r = chat('pool');
is($r->{status}, 200, 'm1 answered 402 (terminal), m2 the request');

my $a = $t->start_post($gw, '/v1/chat/completions', sprintf($body, 'pool'));
sleep(0.3);
my $q = $t->start_post($gw, '/v1/chat/completions', sprintf($body, 'pool'));
sleep(0.3);

# alpha's breaker opens while R waits for m2
my $open;
for (1 .. 3) {
    $r = chat('bad');
    $open = excluded($r);
    sleep(0.05);
}
like($open, qr/m3:circuit_open/, "alpha's breaker is open ($open)");

my $ra = OmniTest::finish($a, 10);
is($ra->{status}, 200, 'A: answered by m2');
sleep(0.2);

$r = chat('pool');
my $fresh = excluded($r);
like($fresh, qr/^m1:circuit_open\b/,
     "a fresh request: m1 excluded by the open breaker first ($fresh)");

# a write of another provider's connection: the tables move on
chat('ot');
$r = chat('pool');
is(excluded($r), $fresh, 'the same exclusions after an unrelated write');

my $rq = OmniTest::finish($q, 10);
ok(defined $rq->{status}, "R was answered ($rq->{status})");

$t->check_error_log;
$t->done;
done_testing;
