#!/usr/bin/perl

# R-CONC-1: requests waiting for a concurrency slot are served in arrival
# order by both workers (a ticket per request in the zone, the oldest one
# takes the slot that frees, newcomers queue behind); after the queue wait
# budget, request_queue.fail_open dispatches past the cap instead of
# answering 503 SEMAPHORE_TIMEOUT.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-one', "sk-one\n");

my $main = "env RATE_LIMIT_MAX_WAIT_MS;\nenv RATE_LIMIT_QUEUE_FAIL_OPEN;";

$t->config(<<'EOF', main => $main);
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_connection one provider=p key_file=%%TESTDIR%%/key-one
                         max_concurrent=2;

    log_format pids '$pid $http_x_req_id';

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;
        access_log %%TESTDIR%%/logs/pids.log pids;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location = /metrics {
            access_log off;
            omniroute_api;
            omniroute_api_token off;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

# 20 requests, 60 ms apart (more than the waiters' polling jitter), on 2
# slots; each takes 300 ms at the provider
$m->set_behavior('delay=300');

# request i is inside the gateway when the provider has it or it waits in
# the queue: "arrival order" is the gateway's, so the next one is sent only
# then (on a loaded machine a worker can take longer than 60 ms to read a
# request; the provider's log is read before the queue depth, so a request
# moving between the two is counted once or not at all, never twice)
sub inside {
    my $at_provider = scalar @{$m->requests};
    my $body = $t->get($gw, '/metrics')->{body} // '';
    my ($depth) = $body =~ /^omniroute_queue_depth (\d+)$/m;
    return $at_provider + ($depth // 0);
}

my @s;
for my $i (1 .. 20) {
    push @s, $t->start_post($gw, '/v1/chat/completions', { model => 'p/m' },
                            'X-Req-Id' => $i);
    my $deadline = time + 10;
    sleep(0.01) while inside() < $i && time < $deadline;
    sleep(0.06);
}

my @r = map { OmniTest::finish($_, 20) } @s;

is(scalar(grep { $_->{status} == 200 } @r), 20, 'R-CONC-1 all 20 served');

my @order = map { $_->{headers}{'x-req-id'} }
            sort { $a->{time} <=> $b->{time} } @{$m->requests};
is_deeply(\@order, [1 .. 20], 'R-CONC-1 dispatched in arrival order')
    or diag("@order");

# never more than 2 at the provider: the n-th arrival is at least 300 ms
# after the (n-2)-th
my @times = sort { $a <=> $b } map { $_->{time} } @{$m->requests};
my $min = 10;
for my $i (2 .. $#times) {
    my $d = $times[$i] - $times[$i - 2];
    $min = $d if $d < $min;
}
cmp_ok($min, '>=', 0.28, 'R-CONC-1 max_concurrent=2 held throughout');

my %pids = map { (split / /)[0] => 1 }
           split /\n/, $t->read_file('logs/pids.log');
cmp_ok(scalar keys %pids, '>=', 2, 'R-CONC-1 the waiters were on both workers');

# fail-open after the queue wait budget (500 ms): past the cap
$t->stop_nginx;
$ENV{RATE_LIMIT_MAX_WAIT_MS} = 500;
$ENV{RATE_LIMIT_QUEUE_FAIL_OPEN} = 'on';
$t->run($gw);

$m->clear;
$m->set_behavior('delay=1500');
@s = map { my $x = $t->start_post($gw, '/v1/chat/completions',
                                  { model => 'p/m' }); sleep(0.05); $x } 1 .. 3;
@r = map { OmniTest::finish($_, 10) } @s;

is_deeply([map { $_->{status} } @r], [200, 200, 200],
          'R-CONC-1 fail-open: the third is served after the wait budget');
@times = sort { $a <=> $b } map { $_->{time} } @{$m->requests};
ok(@times == 3 && $times[2] - $times[0] > 0.4 && $times[2] - $times[0] < 1.2,
   'R-CONC-1 fail-open: dispatched past the cap after about 500 ms')
    or diag(join ' ', map { $_ - $times[0] } @times);
like($t->error_log, qr/dispatched past the caps/, 'fail-open is logged');

$t->done;
done_testing;
