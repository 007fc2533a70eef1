#!/usr/bin/perl

# R-CB-2..4, R-REQ-3, R-REQ-6: the provider circuit breaker, shared by the
# workers: it opens after the profile's count of provider failures summed
# over both workers, the provider is then skipped, HALF_OPEN admits one
# probe under concurrent load, a successful probe closes it; 401/403/429
# never count.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;

my $t = OmniTest->new;
my $flaky = $t->mock('flaky');
my $good = $t->mock('good');
my $auth = $t->mock('auth');

$t->write_file('key-f1', "sk-f1\n");
$t->write_file('key-g', "sk-good\n");
$t->write_file('key-401', "sk-a~status=401\n");
$t->write_file('key-403', "sk-b~status=403\n");
$t->write_file('key-429', "sk-c~status=429\n");

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

    # apikey profile: 12 provider failures open the breaker; connection
    # cooldowns kept to a few milliseconds so that they do not interfere
    omniroute_provider flaky url=http://127.0.0.1:%%PORT_mock_flaky%%/v1
                       kind=apikey breaker_reset=3s cooldown_base=1ms
                       cooldown_max=5ms;
    omniroute_provider good url=http://127.0.0.1:%%PORT_mock_good%%/v1;
    # local profile: 2 provider failures would open it
    omniroute_provider auth url=http://127.0.0.1:%%PORT_mock_auth%%/v1
                       kind=local;

    omniroute_connection f1 provider=flaky key_file=%%TESTDIR%%/key-f1;
    omniroute_connection g1 provider=good key_file=%%TESTDIR%%/key-g;
    omniroute_connection a1 provider=auth key_file=%%TESTDIR%%/key-401;
    omniroute_connection a2 provider=auth key_file=%%TESTDIR%%/key-403;
    omniroute_connection a3 provider=auth key_file=%%TESTDIR%%/key-429;

    omniroute_combo chain flaky/m good/m;
    omniroute_model authonly auth/m;

    log_format omni '\$pid \$status \$omniroute_attempts \$omniroute_connection'
                    ' \$omniroute_failure_reason \$omniroute_breaker_state';

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;
        access_log %%TESTDIR%%/logs/omni.log omni;

        location /v1/ {
            omniroute_pass;
            omniroute_max_attempts 2;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

$flaky->set_behavior('status=503');

# twelve requests: each tries flaky, gets a 503 and falls over to good
for my $i (1 .. 12) {
    my $r = $t->post($gw, '/v1/chat/completions', { model => 'chain' });
    is($r->{status}, 200, "request $i answered by the fallback");
    is($r->{headers}{'x-omniroute-attempts'}, '2', "request $i: two attempts");
    sleep(0.02);
}

is(scalar @{$flaky->requests}, 12, 'flaky saw twelve attempts');

# the breaker is open now: flaky is skipped (its connection's own cooldown
# of a few milliseconds is long over)
sleep(0.05);
my $r = $t->post($gw, '/v1/chat/completions', { model => 'chain' });
is($r->{status}, 200, 'R-CB-2 request 13 is served');
is($r->{headers}{'x-omniroute-attempts'}, '1',
   'R-CB-2 the open breaker skips flaky after 12 failures (apikey profile)');
is($r->{headers}{'x-omniroute-connection'}, 'g1', 'by good');
is(scalar @{$flaky->requests}, 12, 'flaky saw nothing more');

like($t->error_log, qr/circuit breaker of provider "flaky" \S+ -> OPEN/,
     'the transition is logged');

# both workers counted into the same breaker
$t->stop_nginx;
my @lines = split /\n/, $t->read_file('logs/omni.log');
my %pids = map { (split / /)[0] => 1 } grep { / 2 g1 / } @lines;
like($lines[0], qr/ 200 2 g1 server_error closed$/,
     'R-REQ-7 $omniroute_failure_reason and $omniroute_breaker_state');
like($lines[12], qr/ 200 1 g1 - closed$/,
     'R-REQ-7 no failure in a request that skipped the open provider');
cmp_ok(scalar keys %pids, '>=', 2,
       'R-CB-2 the failures were seen by both worker processes')
    or diag('all twelve requests landed on one worker');
$t->run($t->port('gw'));

# the restart cleared the state; open the breaker again quickly
for my $i (1 .. 12) {
    $t->post($gw, '/v1/chat/completions', { model => 'chain' });
    sleep(0.02);
}
$flaky->clear;
$r = $t->post($gw, '/v1/chat/completions', { model => 'chain' });
is($r->{headers}{'x-omniroute-attempts'}, '1', 'open again after restart');

# R-CB-4: after the reset timeout, HALF_OPEN admits a single probe even
# under concurrent load; the probe is slow and succeeds
sleep(3.2);
$flaky->set_behavior('delay=800');

my @socks = map { $t->start_post($gw, '/v1/chat/completions',
                                  '{"model":"chain"}') } 1 .. 10;
my @res = map { OmniTest::finish($_, 5) } @socks;

is(scalar(grep { $_->{status} == 200 } @res), 10,
   'all ten concurrent requests are served');
is(scalar @{$flaky->requests}, 1,
   'R-CB-4 exactly one probe reached the HALF_OPEN provider');
is(scalar(grep { ($_->{headers}{'x-omniroute-connection'} // '') eq 'f1' }
          @res), 1, 'the probe answered one client');

# the probe succeeded: CLOSED, flaky serves again
$flaky->set_behavior(undef);
$r = $t->post($gw, '/v1/chat/completions', { model => 'chain' });
is($r->{headers}{'x-omniroute-attempts'}, '1', 'R-CB-4 closed after the probe');
is($r->{headers}{'x-omniroute-connection'}, 'f1', 'flaky answers again');
like($t->error_log, qr/"flaky" HALF_OPEN -> CLOSED/, 'closing is logged');

# R-CB-3: 401, 403 and 429 never count for the breaker (local profile:
# two countable failures would open it)
for (1 .. 2) {
    $r = $t->post($gw, '/v1/chat/completions', { model => 'authonly' });
}
$r = $t->post($gw, '/v1/chat/completions', { model => 'authonly' });
is($r->{status}, 503, 'every auth connection is cooling down');
my $doc = OmniTest::json($r);
my @reasons = sort map { $_->{reason} } @{$doc->{diagnostics}{excluded}};
is_deeply(\@reasons, [('provider_cooldown') x 3],
          'R-CB-3 connection cooldowns, not circuit_open')
    or diag($r->{body});
unlike($t->error_log, qr/provider "auth"/,
       'R-CB-3 the auth breaker never moved');

$t->done;
done_testing;
