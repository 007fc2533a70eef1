#!/usr/bin/perl

# R-PACE-2/4, R-TOOL-2/4 across a cluster: two nodes (2 workers each)
# sharing a redis-server; the records of table "pace" are mirrored.
#   - a pause set on node A (a 429 whose body asks for 1.5 s on a
#     pacing=on connection) makes node B's requests to that connection
#     wait in B's queue until the pause ends, then go in their order;
#     a B caller whose queue time ends before the pause does is answered
#     at once (503 SEMAPHORE_TIMEOUT, Retry-After);
#   - a tool limit learned on A (200 tools refused) makes B skip that
#     provider/model for requests with as many tools, while a request
#     with 5 tools still uses it;
#   - forged pace records in Redis (a 25-hour pause, a tool limit with
#     reserved bytes set) are rejected by both nodes and change nothing;
#     a valid one in the same layout is taken.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;

OmniTest::need(RedisServer::available(), 'redis-server not installed');

my $TOKEN = 'adm-cluster-pace-0123456789';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $na = OmniTest->new(test_build => 1);
my $redis = RedisServer->new($na)->start;
my $nb = RedisServer::cluster_node($na, 'b');
my $mp = $na->mock('p');
my $ma = $na->mock('a');
my $mb = $na->mock('b');

$nb->{ports}{$_} = $na->port($_) for qw(mock_p mock_a mock_b);

for my $n ($na, $nb) {
    my $name = $n == $na ? 'node-a' : 'node-b';

    $n->write_file('key', "sk-pace-1\n");

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis @{[$redis->addr]} node=$name prefix=t39p: resync=1s
                    log_interval=30s;

    omniroute_provider pp url=http://127.0.0.1:%%PORT_mock_p%%/v1
                       kind=apikey;
    omniroute_connection one provider=pp key_file=%%TESTDIR%%/key
                         pacing=on max_concurrent=1;

    omniroute_provider a url=http://127.0.0.1:%%PORT_mock_a%%/v1;
    omniroute_provider b url=http://127.0.0.1:%%PORT_mock_b%%/v1;
    omniroute_connection a1 provider=a key_file=%%TESTDIR%%/key;
    omniroute_connection b1 provider=b key_file=%%TESTDIR%%/key;
    omniroute_combo smart a/gpt-4.1 b/claude-sonnet;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;
        client_max_body_size 8m;

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

        location = /metrics {
            omniroute_api;
        }

        location /debug {
            omniroute_redis_debug;
        }
    }
EOF
}

sub gw { $_[0]->port('gw') }

sub api {
    my ($n, $method, $path, $body) = @_;
    my %h = (Authorization => "Bearer $TOKEN");
    if (defined $body) {
        $body = encode_json($body);
        $h{'Content-Type'} = 'application/json';
    }
    my $r = $n->http(gw($n), OmniTest::request_text($method, $path, $body,
                                                    %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub metric {
    my ($n, $name) = @_;
    my $body = api($n, 'GET', '/metrics')->{body} // '';
    return $body =~ /^\Q$name\E (\S+)$/m ? $1 : -1;
}

sub rec {
    my ($n, $q) = @_;
    return eval { decode_json($n->get(gw($n), "/debug?$q")->{body}) } || {};
}

sub stats { rec($_[0], '') }

sub wait_for {
    my ($cond, $timeout) = @_;
    my $t0 = time;
    while (time - $t0 < ($timeout // 3)) {
        return (time - $t0) * 1000 if $cond->();
        sleep(0.002);
    }
    return undef;
}

sub within { defined $_[0] ? sprintf(' (%.1f ms)', $_[0]) : ' (never)' }

sub wait_requests {
    my ($mock, $n) = @_;
    return wait_for(sub { @{$mock->requests} >= $n });
}

sub wait429 {
    my ($wait) = @_;
    return 'status=429,body=%7B%22error%22%3A%7B%22message%22%3A%22Rate'
        . '%20limit%20reached%20for%20requests.%20Please%20try%20again'
        . "%20in%20$wait.%22%2C%22type%22%3A%22requests%22%7D%7D";
}

# a real coding-agent request with its tools multiplied

my $fixture = "$FindBin::Bin/../../shared/fixtures/agent_body.py";
$fixture = '/work/shared/fixtures/agent_body.py' unless -e $fixture;
my $base = decode_json(`python3 $fixture 16 smart`);

sub body_with_tools {
    my ($n, $model) = @_;
    my %body = %$base;
    my @tools;
    for my $i (0 .. $n - 1) {
        my $tool = decode_json(encode_json(
            $base->{tools}[$i % @{$base->{tools}}]));
        $tool->{function}{name} = "tool_$i";
        push @tools, $tool;
    }
    $body{tools} = \@tools;
    $body{model} = $model if $model;
    return encode_json(\%body);
}

# the wire format (src/core/or_wire.h) and or_pace_t (src/core/or_pace.h),
# x86-64 layouts; table "pace" is 9

my $PACE = 9;

sub value {
    my ($state) = @_;
    return pack('a2CCVq<', 'OR', 1, $PACE, length $state,
                int(time * 1000)) . $state;
}

sub message {
    my ($key, $state) = @_;
    my $node = 'evil';
    return pack('a2CCCCCCq<VV', 'OR', 1, 0, $PACE, length $node,
                length $key, 0, int(time * 1000), length $state, 0)
           . $node . $key . $state;
}

# epoch tools until since kind reserved
sub pace {
    my (%f) = @_;
    return pack('VVq<q<VV', map { $f{$_} // 0 }
                qw(epoch tools until since kind reserved));
}

# redis-cli -x: the last argument (the value, the message) from stdin
sub cli { return $redis->cli_x(@_); }

###########################################################################

$na->run(gw($na));
$nb->run(gw($nb));

ok(defined wait_for(sub { (stats($na)->{state} // '') eq 'up'
                          && (stats($nb)->{state} // '') eq 'up' }, 5),
   'both links up');

###########################################################################
# R-PACE-2: a pause set on A holds B's requests until it ends

$mp->set_behavior(wait429('1.5s'));

my @s = ($na->start_post(gw($na), '/v1/chat/completions',
                         { model => 'pp/m' }, 'X-Req-Id' => 'a1'));
ok(wait_requests($mp, 1), 'A: the request reached the provider');
$mp->set_behavior('ok');

my $ms = wait_for(sub { rec($nb, 'table=pace&key=p:one')->{found} });
ok(defined $ms && $ms < 100, 'B: the pause record arrives within 100 ms'
   . within($ms));

my $t0 = time;
for my $i (1 .. 3) {
    push @s, $nb->start_post(gw($nb), '/v1/chat/completions',
                             { model => 'pp/m' }, 'X-Req-Id' => "b$i");
    sleep(0.05);
}

my @r = map { OmniTest::finish($_, 10) } @s;
my $took = time - $t0;

is_deeply([map { $_->{status} } @r], [(200) x 4],
          'R-PACE-2 every request is served after the pause')
    or diag(join ' ', map { "$_->{status} $_->{body}" } @r);
is_deeply([map { $_->{headers}{'x-omniroute-connection'} // '' } @r],
          [('one') x 4], '... by the paused connection');

my @reqs = sort { $a->{time} <=> $b->{time} } @{$mp->requests};
my @order = map { $_->{headers}{'x-req-id'} } @reqs;
is(scalar @reqs, 5, 'the provider got the 429, then the four requests');
is($order[0], 'a1', 'first A\'s request (told to wait)');
is_deeply([grep { /^b/ } @order], [qw(b1 b2 b3)],
          'R-PACE-2 B\'s requests went in their order')
    or diag("@order");

my $gap = @reqs > 1 ? (sort { $a <=> $b }
                       map { $_->{time} - $reqs[0]{time} } @reqs[1 .. $#reqs])[0]
                    : 0;
cmp_ok($gap, '>=', 1.4, 'R-PACE-2 nothing reached the provider before the '
       . 'pause ended, from either node') or diag($gap);
my $last = $reqs[-1]{time} - $reqs[0]{time};
cmp_ok($last, '<', 2.5, 'R-PACE-2 ... and both queues went on once it ended')
    or diag($last);
is($r[0]{headers}{'x-omniroute-attempts'}, '2',
   'A: the paced request was retried on the same connection');
is($r[1]{headers}{'x-omniroute-attempts'}, '1',
   'B: its requests never met the 429');

is(metric($na, 'omniroute_pacing_total{event="pause"}'), 1,
   'A: one pause counted');
is(metric($nb, 'omniroute_pacing_total{event="pause"}'), 0,
   'B: none of its own');
cmp_ok(metric($nb, 'omniroute_pacing_total{event="queued"}'), '>=', 3,
       'B: its three requests waited a pause');

# R-PACE-4 on B: a pause longer than the caller's queue time

$mp->clear;
my $applied = stats($nb)->{applied} // 0;
$mp->set_behavior(wait429('2.5s'));
my $sa = $na->start_post(gw($na), '/v1/chat/completions', { model => 'pp/m' });
ok(wait_requests($mp, 1), 'A: told to wait 2.5 s');
$mp->set_behavior('ok');
ok(defined wait_for(sub { (stats($nb)->{applied} // 0) > $applied }),
   'B: has applied the new pause');

my $r = api($nb, 'PATCH', '/api/resilience',
            { global => { request_queue => { max_wait_ms => 500 } } });
is($r->{status}, 200, 'the queue wait budget is 500 ms');

$t0 = time;
$r = $nb->post(gw($nb), '/v1/chat/completions', { model => 'pp/m' });
$took = time - $t0;
is($r->{status}, 503, 'R-PACE-4 B: a caller with 500 ms left gets 503 ...');
is(OmniTest::json($r)->{error}{code}, 'SEMAPHORE_TIMEOUT',
   '... SEMAPHORE_TIMEOUT');
cmp_ok($took, '<', 0.4, '... at once') or diag($took);
like($r->{headers}{'retry-after'} // '', qr/^[1-3]$/,
     '... with a Retry-After of the pause\'s end on A');
is(scalar @{$mp->requests}, 1, 'B sent nothing to the paused connection');

is(OmniTest::finish($sa, 10)->{status}, 200, 'A: its request waited it out');
api($nb, 'PATCH', '/api/resilience',
    { global => { request_queue => { max_wait_ms => 30000 } } });

###########################################################################
# R-TOOL-2/4: a tool limit learned on A; B skips the target for as many
# tools and uses it for fewer

my $err = JSON::PP->new->canonical->encode({ error => {
    message => "Invalid 'tools': array too long. Expected an array with "
               . "maximum length 128, but got an array with length 200 "
               . "instead.",
    type => 'invalid_request_error', param => 'tools',
    code => 'array_above_max_length' } });
(my $esc = $err) =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;

$ma->set_behavior("status=400,body=$esc");
$r = $na->post(gw($na), '/v1/chat/completions', body_with_tools(200));
is($r->{headers}{'x-omniroute-connection'}, 'b1',
   'A: 200 tools refused by a, served by b');
like($r->{headers}{'x-omniroute-trail'} // '', qr/^a1;400;\d+ms, b1;200/,
     'A: a answered 400 first');
$ma->set_behavior('ok');

my $tkey = 'table=pace&key=t:a|gpt-4.1';
$ms = wait_for(sub { rec($nb, $tkey)->{found} });
ok(defined $ms && $ms < 100, 'B: the tool limit arrives within 100 ms'
   . within($ms));

my $to_a = scalar @{$ma->requests};

$r = $nb->post(gw($nb), '/v1/chat/completions', body_with_tools(200));
is($r->{status}, 200, 'B: 200 tools answered ...');
is($r->{headers}{'x-omniroute-connection'}, 'b1', '... by b: a is skipped');
is($r->{headers}{'x-omniroute-attempts'}, '1', '... without trying a');
is(scalar @{$ma->requests}, $to_a, 'B sent no large request to a');

$r = $nb->post(gw($nb), '/v1/chat/completions', body_with_tools(250));
is($r->{headers}{'x-omniroute-connection'}, 'b1', 'B: 250 tools: skipped too');

$r = $nb->post(gw($nb), '/v1/chat/completions', body_with_tools(5));
is($r->{headers}{'x-omniroute-connection'}, 'a1',
   'B: 5 tools still use a');
is(scalar @{decode_json($ma->requests->[-1]{body})->{tools}}, 5,
   '... which got the 5 tools');

$r = $nb->post(gw($nb), '/v1/chat/completions',
               body_with_tools(200, 'a/gpt-4.1'));
is($r->{status}, 503, 'B: a alone with 200 tools: 503');
is(OmniTest::json($r)->{diagnostics}{excluded}[0]{reason}, 'tool_limit',
   '... reason tool_limit');
cmp_ok(metric($nb, 'omniroute_tool_limit_total{event="skip"}'), '>=', 2,
       'B: the skips counted');

###########################################################################
# forged pace records in Redis: rejected, nothing changed

my %rej0 = map { ($_ => stats($_)->{rejected} // 0) } $na, $nb;
my $tool_value = $redis->cmd('GET', 't39p:pace:t:a|gpt-4.1') // '';
is(length $tool_value, 16 + 32,
   'the pace value in Redis has the size the test assumes');
my $now = int(time * 1000);

# published: "one" paused for 25 hours (a pace record spans at most 24)
cli(message('p:one', pace(epoch => 1000, until => $now + 25 * 3600_000,
                          since => $now, kind => 1)),
    'PUBLISH', 't39p:events:0');

# SET: the tool limit down to 1 tool, with a higher epoch and reserved set
cli(value(pace(epoch => 1000, tools => 1, until => $now + 3600_000,
               since => $now, kind => 2, reserved => 7)),
    'SET', 't39p:pace:t:a|gpt-4.1');

ok(defined wait_for(sub { (stats($na)->{rejected} // 0)
                          + (stats($nb)->{rejected} // 0)
                          >= $rej0{$na} + $rej0{$nb} + 3 }, 5),
   'both nodes reject the published pause, a full load the SET limit')
    or diag(encode_json([stats($na), stats($nb)]));
ok(defined wait_for(sub { ($redis->cmd('GET', 't39p:pace:t:a|gpt-4.1') // '')
                          ne '' && substr($redis->cmd('GET',
                          't39p:pace:t:a|gpt-4.1'), 16)
                          eq substr($tool_value, 16) }, 5),
   'Redis holds the nodes\' own tool limit again');
cmp_ok(metric($na, 'omniroute_redis_records_rejected_total'), '>', 0,
       'A: omniroute_redis_records_rejected_total counts them');
like($na->error_log, qr/\[warn\].*table "pace", key "p:one" \(bad until\); ignored/,
     'the rejection is logged with table, key and field');

for my $n ($na, $nb) {
    my $name = $n == $na ? 'A' : 'B';

    $t0 = time;
    $r = $n->post(gw($n), '/v1/chat/completions', { model => 'pp/m' });
    ok($r->{status} == 200 && time - $t0 < 0.5,
       "$name: one is not paused by the forged record");

    $r = $n->post(gw($n), '/v1/chat/completions', body_with_tools(5));
    is($r->{headers}{'x-omniroute-connection'}, 'a1',
       "$name: 5 tools still use a (the forged limit of 1 not taken)");
}

# control: a valid pause in the same layout is taken

$applied = stats($nb)->{applied} // 0;
$now = int(time * 1000);
cli(message('p:one', pace(epoch => 1000, until => $now + 800,
                          since => $now, kind => 1)),
    'PUBLISH', 't39p:events:0');
ok(defined wait_for(sub { (stats($nb)->{applied} // 0) > $applied }),
   'control: a valid published pause is applied');
$mp->clear;
$t0 = time;
$r = $nb->post(gw($nb), '/v1/chat/completions', { model => 'pp/m' });
$took = time - $t0;
is($r->{status}, 200, 'control: B serves pp/m ...');
ok($took > 0.4 && $took < 1.5,
   sprintf('control: ... after the valid 800 ms pause (%.2f s)', $took));

unlike($na->read_file('logs/error.log') . $nb->read_file('logs/error.log'),
       qr/sk-pace-1/, 'the credential is never logged');

$nb->done;
$na->done;
$redis->stop;
done_testing;
