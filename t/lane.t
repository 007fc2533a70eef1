#!/usr/bin/perl

# R-LANE: the Claude usage-limit wall of a usage_lane=on connection.  A 429
# "unified-status: rejected" with the slow offer is not a cooldown: the
# same connection is tried again at once with "anthropic-usage-limit:
# slow", and every request to it carries that header until the announced
# reset + 60 s, on both workers and across nginx -s reload (the lane is a
# record of the zone).  Each end state (weekly_limit, budget_exhausted,
# off, ineligible, overage in use) ends it and goes down the normal
# cooldown path; a slot_busy wait is bounded by slow-max-wait.  R-LANE-7:
# the session-limit reset is tried before the lane, claimed once and
# memoised (a failure backs off).  Mocks: t/lib/WallMock.pm.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;
use WallMock;

my $TOKEN = 'lane-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $t = OmniTest->new;

my %mock;

for my $name (qw(wall rs1 rs2 rs3)) {
    $mock{$name} = WallMock->new(port => $t->port("mock_$name"),
                                 log => $t->dir . "/wall-$name.log",
                                 @{{ rs1 => [usage => 'avail',
                                             claim => 'reset'],
                                     rs2 => [usage => 'used'],
                                     rs3 => [usage => 'fail'],
                                     wall => [] }->{$name}});
    $mock{$name}->start;
}

$t->write_file('key', "sk-ant-oat01-secret\n");

my $T0 = int(time);
my $stale = $T0 - 50;           # the lane lasts until T0 + 10 s

my $providers = '';
my $conns = '';
my %path = (
    pw => 'reset=3600',
    pn => 'reset=3600',
    ps => "resetat=$stale",
    pb => 'slow=slot_busy,retry=600,maxwait=60',
    map { ("e_$_" => "slow=$_") }
        qw(weekly_limit budget_exhausted off ineligible extra_usage),
);

for my $p (sort keys %path) {
    $providers .= "    omniroute_provider $p url=http://127.0.0.1:"
                . "%%PORT_mock_wall%%/m/$path{$p}/v1 kind=oauth "
                . "auth=x-api-key;\n";
    my $lane = $p eq 'pn' ? '' : ' usage_lane=on';
    $conns .= "    omniroute_connection c_$p provider=$p "
            . "key_file=%%TESTDIR%%/key$lane;\n";
}

for my $n (1 .. 3) {
    $providers .= "    omniroute_provider r$n url=http://127.0.0.1:"
                . "%%PORT_mock_rs$n%%/m/reset=3600/v1 kind=oauth "
                . "auth=x-api-key;\n";
}

$conns .= "    omniroute_connection c_r1 provider=r1 key_file=%%TESTDIR%%/key "
        . "usage_lane=on limit_reset=on org=0a1b2c3d-0000-4000-8000-aabbcc;\n"
        . "    omniroute_connection c_r2 provider=r2 key_file=%%TESTDIR%%/key "
        . "usage_lane=on limit_reset=on org=0a1b2c3d-0000-4000-8000-aabbcc;\n"
        . "    omniroute_connection c_r3 provider=r3 key_file=%%TESTDIR%%/key "
        . "limit_reset=on org=0a1b2c3d-0000-4000-8000-aabbcc "
        . "disable_cooling=on;\n";

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

$providers
$conns
    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

        location /v1/ {
            omniroute_pass;
            client_max_body_size 8m;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /ops/ {
            omniroute_api prefix=/ops;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

# a real coding-agent request (system prompt, tools, turns)

my $gen = "$OmniTest::ROOT/../shared/fixtures/agent_body.py";
my $agent = -f $gen ? `python3 $gen 24 MODEL` : '';
$agent = '{"model":"MODEL","max_tokens":64,"messages":[{"role":"user",'
       . '"content":"hi"}]}' unless $? == 0 && length $agent;

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub ask {
    my ($model, %h) = @_;
    (my $b = $agent) =~ s/"MODEL"/"$model"/;
    return $t->post($gw, '/v1/messages', $b, %h);
}

sub lane_of {
    my ($id) = @_;
    my $r = $t->get($gw, '/ops/api/resilience/cooldowns',
                    Authorization => "Bearer $TOKEN");
    my ($c) = grep { $_->{id} eq $id }
              @{OmniTest::json($r)->{connections}};
    return $c;
}

sub slow { ($_[0]{headers}{'anthropic-usage-limit'} // '') eq 'slow' }

sub reqs {
    my ($name, $re) = @_;
    return [grep { $_->{path} =~ $re } @{$mock{$name}->requests}];
}

# R-LANE-1, R-LANE-2: the wall, then the same connection with the header

my $r = ask('pw/claude');
is($r->{status}, 200, 'R-LANE-2 the wall 429 did not reach the client');
is($r->{headers}{'x-omniroute-connection'}, 'c_pw',
   'R-LANE-2 served by the same connection');

my $seen = reqs('wall', qr{^/m/reset=3600/});
is(scalar @$seen, 2, 'R-LANE-2 two attempts: the wall, then the retry');
ok(!slow($seen->[0]) && slow($seen->[1]),
   'R-LANE-2 the retry carried anthropic-usage-limit: slow');
ok(!grep({ ($_->{headers}{'x-api-key'} // '') ne 'sk-ant-oat01-secret' }
         @$seen), 'the connection\'s credential on both attempts');

my $c = lane_of('c_pw');
is($c->{lane}{phase}, 'active', 'R-LANE-9 the API shows the lane active');
is($c->{status}, 'active', 'R-LANE-2 the connection is not cooling down');
ok(abs($c->{lane}{until} / 1000 - (time + 3600 + 60)) < 5,
   'R-LANE-2 the lane lasts until the reset + 60 s');

# every later request carries it, on either worker, from the first attempt

$mock{wall}->clear;
my @socks = map {
    (my $b = $agent) =~ s/"MODEL"/"pw\/claude"/;
    $t->start_post($gw, '/v1/messages', $b,
                   'Content-Type' => 'application/json')
} 1 .. 6;
my $ok = grep { OmniTest::finish($_, 10)->{status} == 200 } @socks;
is($ok, 6, 'R-LANE-2 six concurrent requests answered');
$seen = reqs('wall', qr{^/m/reset=3600/});
is(scalar(grep { slow($_) } @$seen), 6,
   'R-LANE-2 each carried the header at once (shared by both workers)');
is(scalar @$seen, 6, 'R-LANE-2 no wall on the way');

# a connection without usage_lane: the normal path

$r = ask('pn/claude');
is($r->{status}, 429, 'without usage_lane=on the wall reaches the client');
is(lane_of('c_pn')->{lane}, undef, 'R-LANE-9 and it has no lane');
is(lane_of('c_pn')->{status}, 'cooldown', 'and the connection cools down');

# R-LANE-2: until the reset + grace only (a reset 50 s ago: 10 s left)

$mock{wall}->clear;
$r = ask('ps/claude');
is($r->{status}, 200, 'R-LANE-2 stale window: lane entered');
$r = ask('ps/claude');
$seen = reqs('wall', qr{^/m/resetat=});
ok(slow($seen->[-1]), 'R-LANE-2 a later request carries the header');
sleep($T0 + 10.5 - time) if $T0 + 10.5 > time;
$mock{wall}->clear;
$r = ask('ps/claude');
$seen = reqs('wall', qr{^/m/resetat=});
ok(@$seen && !slow($seen->[0]),
   'R-LANE-2 after the reset + 60 s no header any more');
is($r->{status}, 429, 'R-LANE-2 a wall of a window that is over: normal path');

# R-LANE-5: each end state ends the lane and goes down the cooldown path

for my $s (qw(weekly_limit budget_exhausted off ineligible extra_usage)) {
    $r = ask("e_$s/claude");
    is($r->{status}, 429, "R-LANE-5 $s: the 429 reaches the client");
    $c = lane_of("c_e_$s");
    is($c->{lane}{phase}, 'ended', "R-LANE-5 $s: the lane ended");
    is($c->{lane}{end}, $s, "R-LANE-5 $s: end state named");
    is($c->{status}, 'cooldown', "R-LANE-5 $s: the connection cools down");

    if ($s eq 'budget_exhausted') {
        ok(abs($c->{lane}{blocked_until} / 1000 - (time + 3 * 86400)) < 5,
           'R-LANE-5 budget_exhausted remembered until its reset');
    }
}

# R-LANE-4: a slot_busy wait is bounded by slow-max-wait (60 s, not the
# 600 s retry-after); the client going away ends the wait

my $s = do {
    (my $b = $agent) =~ s/"MODEL"/"pb\/claude"/;
    $t->start_post($gw, '/v1/messages', $b,
                   'Content-Type' => 'application/json');
};
my $deadline = time + 5;
my $log = '';
while (time < $deadline) {
    $log = $t->error_log;
    last if $log =~ /"c_pb" is busy, retrying in/;
    sleep(0.2);
}
like($log, qr/"c_pb" is busy, retrying in (59\d\d\d|60000) ms/,
     'R-LANE-4 the wait is cut to slow-max-wait');
close $s;
is(lane_of('c_pb')->{lane}{waits}, 1, 'R-LANE-9 the wait is counted');

# R-LANE-7: the session-limit reset, before the lane: probe, claim, then
# the same connection at full speed

$r = ask('r1/claude');
is($r->{status}, 200, 'R-LANE-7 reset claimed: answered');
my @rs = map { "$_->{method} $_->{path}" } @{$mock{rs1}->requests};
is_deeply(\@rs, ['POST /m/reset=3600/v1/messages',
                 'GET /api/oauth/usage?at_wall=1&skip_spend=1',
                 'POST /api/organizations/0a1b2c3d-0000-4000-8000-aabbcc'
                 . '/reset_rate_limits',
                 'POST /m/reset=3600/v1/messages'],
          'R-LANE-7 wall, usage probe, claim, retry');
my $rq = $mock{rs1}->requests;
ok(!slow($rq->[3]), 'R-LANE-7 the retry runs at full speed (no header)');
is($rq->[1]{headers}{'x-api-key'}, 'sk-ant-oat01-secret',
   'R-LANE-7 the probe carries the connection\'s credential');
ok(!grep({ exists $_->{headers}{authorization} } @$rq),
   'R-LANE-7 no client credential reaches the provider');
$c = lane_of('c_r1');
is($c->{lane}{reset}{result}, 'reset', 'R-LANE-7 memo: reset');
ok(abs($c->{lane}{reset}{next_at} / 1000 - (time + 7 * 86400)) < 5,
   'R-LANE-7 memoised for a week');
is($c->{lane}{phase}, 'none', 'R-LANE-7 no lane after a reset');

$r = ask('r1/claude');
is(scalar(grep { $_->{path} =~ /reset_rate_limits/ }
          @{$mock{rs1}->requests}), 1, 'R-LANE-7 claimed once');

# not available: memoised until next_available_at, then the lane

$r = ask('r2/claude');
is($r->{status}, 200, 'R-LANE-7 no reset offered: the lane answers');
$rq = $mock{rs2}->requests;
is(scalar @$rq, 3, 'R-LANE-7 wall, probe, lane retry (no claim)');
ok(slow($rq->[2]), 'R-LANE-7 the retry is in the lane');
$c = lane_of('c_r2');
is($c->{lane}{reset}{result}, 'unavailable', 'R-LANE-7 memo: unavailable');
ok(abs($c->{lane}{reset}{next_at} / 1000 - (time + 2 * 86400)) < 5,
   'R-LANE-7 memoised until next_available_at');

# a failed probe backs off 15 min: the next wall does not probe

$r = ask('r3/claude');
is($r->{status}, 429, 'R-LANE-7 failed probe, no lane: the 429');
$r = ask('r3/claude');
is(scalar(grep { $_->{path} =~ m{/api/oauth/usage} }
          @{$mock{rs3}->requests}), 1, 'R-LANE-7 probed once');
$c = lane_of('c_r3');
is($c->{lane}{reset}{result}, 'failed', 'R-LANE-7 memo: failed');
ok(abs($c->{lane}{reset}{next_at} / 1000 - (time + 900)) < 5,
   'R-LANE-7 backs off 15 min');

# R-LANE-9: metrics

$r = $t->get($gw, '/ops/metrics', Authorization => "Bearer $TOKEN");
like($r->{body}, qr/^omniroute_lane_entries_total [4-9]$/m,
     'R-LANE-9 lane entries counted');
like($r->{body}, qr/^omniroute_lane_ends_total\{state="weekly_limit"\} 1$/m,
     'R-LANE-9 lane ends by state');
like($r->{body}, qr/^omniroute_limit_resets_total\{result="reset"\} 1$/m,
     'R-LANE-9 resets by result');

# R-LANE-8: the lane survives a reload (the zone's record)

my $until = lane_of('c_pw')->{lane}{until};
$t->reload;
sleep(0.5);
$mock{wall}->clear;
$r = ask('pw/claude');
is($r->{status}, 200, 'R-LANE-8 after reload: answered');
$seen = reqs('wall', qr{^/m/reset=3600/});
ok(@$seen == 1 && slow($seen->[0]),
   'R-LANE-8 after reload the first attempt carries the header');
is(lane_of('c_pw')->{lane}{until}, $until, 'R-LANE-8 the same lane');

unlike($t->read_file('logs/error.log'), qr/sk-ant-oat01-secret/,
       'the credential is never logged');

$_->stop for values %mock;
$t->done;
done_testing();
