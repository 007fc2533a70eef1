#!/usr/bin/perl

# The store returns to empty (issue 12, item 5): a healthy gateway keeps
# no records; a breaker that counted a failure is deleted by the next
# success that leaves it with nothing to decide; a lapsed lockout is gone
# from the zone.  Observed through omniroute_zone_records (2 workers).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep);
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $TOKEN = 'empty-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-ok', "sk-ok\n");
$t->write_file('key-bad', "sk-ok\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=apikey;
    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-bad
                         priority=1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-ok
                         priority=2;

    omniroute_model smart alpha/m1;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location = /metrics {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');

sub records {
    my ($table) = @_;
    my $r = $t->get($gw, '/metrics', Authorization => "Bearer $TOKEN");
    return $r->{body} =~ /^omniroute_zone_records\{table="$table"\} (\d+)$/m
           ? $1 : undef;
}

sub post {
    return $t->post($gw, '/v1/chat/completions',
                    '{"model":"smart","messages":[]}');
}

# healthy traffic writes nothing
is(post()->{status}, 200, 'a healthy request') for 1 .. 4;
is(records('breaker'), 0, 'healthy: no breaker record');
is(records('connection'), 0, 'healthy: no connection record');

# a1 fails: it cools, the breaker counts the failure, a2 answers
$t->write_file('key-bad', "sk-bad~status=500\n");
$t->reload;
sleep(1);       # the old workers are gone
$m->clear;

my $r = post();
is($r->{status}, 200, 'a1 fails, a2 answers');
is(scalar @{$m->requests}, 2, 'two attempts');
is(records('breaker'), 1, 'the breaker counted the failure');
is(records('connection'), 1, 'a1 is cooling');

# the next success (a2; a1 is cooling) settles the breaker: it has
# nothing left to decide, so the record is deleted
is(post()->{status}, 200, 'the next request');
is(records('breaker'), 0, 'the success deleted the settled breaker record: '
   . 'the table is empty again');
is(records('connection'), 1, 'the cooldown of a1 stays');

$t->done;
done_testing;
