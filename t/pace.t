#!/usr/bin/perl

# R-PACE-1/2/4/5: a 429 whose body states a wait that fits the queue wait
# budget pauses its connection instead of failing over: the request and
# those that arrive meanwhile wait in the model's FIFO queue (both
# workers) and are dispatched in order once the pause ends; a caller
# whose queue time ends before the pause does is answered at once with
# the queue-timeout code; the safety net (RATE_LIMIT_AUTO_ENABLE) paces
# API-key connections, pacing=off opts one out, and the net is switched
# at runtime.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep time);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');
my $q = $t->mock('q');

my $TOKEN = 'adm-0123456789-abcdefghij';

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$ENV{RATE_LIMIT_AUTO_ENABLE} = 'true';

$t->write_file('key-one', "sk-one\n");
$t->write_file('key-off', "sk-off\n");

my $main = "env RATE_LIMIT_AUTO_ENABLE;\nenv OMNI_TEST_API_TOKEN;";

$t->config(<<'EOF', main => $main);
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1
                       kind=apikey;
    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_q%%/v1
                       kind=apikey;

    # no pacing= parameter: the safety net decides (on, by the env); one
    # at a time, so that the order of the waiters is the order they go in
    omniroute_connection one provider=p key_file=%%TESTDIR%%/key-one
                         max_concurrent=1;

    # opted out of the safety net
    omniroute_connection off provider=q key_file=%%TESTDIR%%/key-off
                         pacing=off;

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

        location / {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub api {
    my ($method, $path, $body) = @_;
    my %h = (Authorization => "Bearer $TOKEN");
    if (defined $body) {
        $body = encode_json($body) if ref $body;
        $h{'Content-Type'} = 'application/json';
    }
    my $r = $t->http($gw, OmniTest::request_text($method, $path, $body, %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub wait_requests {
    my ($mock, $n) = @_;
    for (1 .. 300) {
        return 1 if @{$mock->requests} >= $n;
        sleep(0.01);
    }
    return 0;
}

sub metric {
    my ($name) = @_;
    my $r = api('GET', '/metrics');
    return $r->{body} =~ /^\Q$name\E (\d+)/m ? $1 : -1;
}

sub wait429 {
    my ($wait) = @_;
    return 'status=429,body=%7B%22error%22%3A%7B%22message%22%3A%22Rate'
        . '%20limit%20reached%20for%20requests.%20Please%20try%20again'
        . "%20in%20$wait.%22%2C%22type%22%3A%22requests%22%7D%7D";
}

# 1. FIFO across the pause: request 1 is told to wait 1.5 s, 2..12 arrive
#    during the pause (on both workers: reuseport)

$m->set_behavior(wait429('1.5s'));

my @s = ($t->start_post($gw, '/v1/chat/completions', { model => 'p/m' },
                        'X-Req-Id' => 1));

ok(wait_requests($m, 1), 'the first request reached the provider');
$m->set_behavior('ok');

for my $i (2 .. 12) {
    push @s, $t->start_post($gw, '/v1/chat/completions', { model => 'p/m' },
                            'X-Req-Id' => $i);
    sleep(0.05);
}

my @r = map { OmniTest::finish($_, 20) } @s;

is_deeply([map { $_->{status} } @r], [(200) x 12],
          'R-PACE-2 every request is served after the pause')
    or diag(join ' ', map { "$_->{status} $_->{body}" } @r);

my @reqs = sort { $a->{time} <=> $b->{time} } @{$m->requests};
my @order = map { $_->{headers}{'x-req-id'} } @reqs;
is_deeply(\@order, [1, 1, 2 .. 12],
          'R-PACE-2 the paced request and the waiters go in FIFO order')
    or diag("@order");

my $gap = $reqs[1]{time} - $reqs[0]{time};
cmp_ok($gap, '>=', 1.4, 'R-PACE-2 nothing dispatched before the pause ended')
    or diag($gap);
cmp_ok($gap, '<', 2.5, 'R-PACE-2 ... and the queue went on once it ended');

is($r[0]{headers}{'x-omniroute-attempts'}, '2',
   'R-PACE-2 the paced request was retried on the same connection');
is($r[0]{headers}{'x-omniroute-connection'}, 'one', '... which answered');

my %pids = map { (split / /)[0] => 1 }
           split /\n/, $t->read_file('logs/pids.log');
cmp_ok(scalar keys %pids, '>=', 2,
       'R-PACE-2 the waiters were on both workers');

is(metric('omniroute_pacing_total{event="pause"}'), 1,
   'metrics: one pause');
cmp_ok(metric('omniroute_pacing_total{event="queued"}'), '>=', 5,
       'metrics: the requests that waited a pause');
like($t->error_log, qr/connection "one" paced for 1500 ms/,
     'the pause is logged');

# 2. the pause outlasts a caller's queue time: answered at once

$m->clear;
$m->set_behavior(wait429('2.5s'));

my $a = $t->start_post($gw, '/v1/chat/completions', { model => 'p/m' });
ok(wait_requests($m, 1), 'a request was told to wait 2.5 s');
$m->set_behavior('ok');

my $r = api('PATCH', '/api/resilience',
            { global => { request_queue => { max_wait_ms => 500 } } });
is($r->{status}, 200, 'the queue wait budget is now 500 ms');

my $t0 = time;
my $b = $t->post($gw, '/v1/chat/completions', { model => 'p/m' });
my $took = time - $t0;

is($b->{status}, 503, 'R-PACE-4 a caller with 500 ms left gets 503 ...');
is(OmniTest::json($b)->{error}{code}, 'SEMAPHORE_TIMEOUT',
   'R-PACE-4 ... the queue-timeout code');
cmp_ok($took, '<', 0.4, 'R-PACE-4 ... at once, not after its 500 ms')
    or diag($took);
like($b->{headers}{'retry-after'} // '', qr/^[1-3]$/,
     'R-PACE-4 Retry-After: when the pause ends');

my $ra = OmniTest::finish($a, 10);
is($ra->{status}, 200, 'R-PACE-2 the one queued before waits it out');
cmp_ok(metric('omniroute_pacing_total{event="queue_timeout"}'), '>=', 1,
       'metrics: answered at once');

api('PATCH', '/api/resilience',
    { global => { request_queue => { max_wait_ms => 30000 } } });

# 3. pacing=off: out of the safety net, the 429 is answered as before

$q->set_behavior(wait429('1.5s'));

$t0 = time;
$r = $t->post($gw, '/v1/chat/completions', { model => 'q/m' });
$took = time - $t0;

is($r->{status}, 429, 'R-PACE-5 pacing=off: the provider\'s 429 ...');
cmp_ok($took, '<', 1, 'R-PACE-5 ... at once, no pause');
is(metric('omniroute_pacing_total{event="pause"}'), 2,
   'R-PACE-5 no pause counted for it');

# 4. the safety net switched off at runtime: "one" no longer paces

$r = api('PATCH', '/api/resilience',
         { global => { request_queue => { auto_enable => JSON::PP::false } } });
is($r->{status}, 200, 'request_queue.auto_enable off at runtime');

sleep(2.6);     # the 2.5 s pause of part 2 is over (cooldown none)
$m->set_behavior(wait429('1.5s'));

$t0 = time;
$r = $t->post($gw, '/v1/chat/completions', { model => 'p/m' });
$took = time - $t0;

is($r->{status}, 429, 'R-PACE-5 safety net off: the 429 as before');
cmp_ok($took, '<', 1, 'R-PACE-5 ... without a pause');

$t->done;
done_testing;
