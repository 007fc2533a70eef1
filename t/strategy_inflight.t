#!/usr/bin/perl

# R-ROUTE: strategies that read in-flight attempts (least-used, headroom)
# see the counts of both workers; R-CONF-3 max_concurrent and cost.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file("key-$_", "sk-$_\n") for qw(a b c d);

$t->config(<<'EOF2');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_p%%/q;
    omniroute_provider r url=http://127.0.0.1:%%PORT_mock_p%%/r;

    omniroute_connection a provider=p key_file=%%TESTDIR%%/key-a;
    omniroute_connection b provider=p key_file=%%TESTDIR%%/key-b;
    omniroute_connection c provider=q key_file=%%TESTDIR%%/key-c
                         max_concurrent=1;
    omniroute_connection d provider=q key_file=%%TESTDIR%%/key-d
                         max_concurrent=3;
    omniroute_connection e provider=r key_file=%%TESTDIR%%/key-a cost=0.75;
    omniroute_connection f provider=r key_file=%%TESTDIR%%/key-b cost=0.25;

    omniroute_combo lu strategy=least-used p/m;
    omniroute_combo hr strategy=headroom q/m;
    omniroute_combo cheap strategy=cost-optimized r/m;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

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

sub start {
    my ($model) = @_;
    return $t->start_post($gw, '/v1/chat/completions', { model => $model });
}

sub conn_of {
    my ($s) = @_;
    return OmniTest::finish($s)->{headers}{'x-omniroute-connection'};
}


$m->set_behavior('delay=1200');

# least-used: a busy connection is passed over while it is busy
my $s1 = start('lu');
sleep(0.3);
my $s2 = start('lu');
sleep(0.3);
my $s3 = start('lu');
is(conn_of($s1), 'a', 'R-ROUTE least-used: the first request takes a');
is(conn_of($s2), 'b', 'R-ROUTE least-used: the second, while a is busy, b');
is(conn_of($s3), 'a', 'R-ROUTE least-used: a tie goes to the first again');

# headroom: most free concurrency first (d: 3 slots, c: 1 slot)
$s1 = start('hr');
sleep(0.3);
$s2 = start('hr');
sleep(0.3);
$s3 = start('hr');
is(conn_of($s1), 'd', 'R-ROUTE headroom: d has the most free slots');
is(conn_of($s2), 'd', 'R-ROUTE headroom: still d (2 free vs 1)');
is(conn_of($s3), 'c', 'R-ROUTE headroom: then c (1 free vs 1, c first)');

# the counts went back to zero once the attempts ended
$m->set_behavior(undef);
$s1 = start('lu');
is(conn_of($s1), 'a', 'in-flight counts are released');

# cost-optimized: the cheaper connection first
$s1 = start('cheap');
is(conn_of($s1), 'f', 'R-ROUTE cost-optimized: cost=0.25 before cost=0.75');

$t->done;
done_testing;
