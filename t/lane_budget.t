#!/usr/bin/perl

# R-LANE-4: a slot_busy wait in the usage-limit lane is bounded by the
# request's own budget (request.budget_ms less 5 s): past that deadline
# the lane ends (max_wait, a 10-minute cool-off that blocks a new entry)
# and the 429 goes down the normal path: the next connection answers.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;
use WallMock;

my $TOKEN = 'lane-budget-0123456789';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$ENV{OMNIROUTE_REQUEST_BUDGET_MS} = 12000;

my $t = OmniTest->new;
my $ok = $t->mock('ok');
my $wall = WallMock->new(port => $t->port('mock_wall'),
                         log => $t->dir . '/wall.log');
$wall->start;

$t->write_file('key', "sk-ant-oat01-secret\n");

$t->config(<<'EOF', main => 'env OMNIROUTE_REQUEST_BUDGET_MS;');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider pb
        url=http://127.0.0.1:%%PORT_mock_wall%%/m/slow=slot_busy,retry=5/v1
        kind=oauth auth=x-api-key;
    omniroute_provider pok url=http://127.0.0.1:%%PORT_mock_ok%%/v1;

    omniroute_connection cb provider=pb key_file=%%TESTDIR%%/key
                         usage_lane=on;
    omniroute_connection cok provider=pok key_file=%%TESTDIR%%/key;

    omniroute_combo claude wait=off pb/claude pok/claude;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

        location /v1/ {
            omniroute_pass;
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

$t->run($t->port('gw'));
my $gw = $t->port('gw');

my $start = time;
my $r = $t->post($gw, '/v1/messages',
                 { model => 'claude', max_tokens => 64,
                   messages => [{ role => 'user', content => 'hi' }] });
my $took = time - $start;

is($r->{status}, 200, 'R-LANE-4 answered by the next connection');
is($r->{headers}{'x-omniroute-connection'}, 'cok', 'R-LANE-4 after the lane');
ok($took > 5.5 && $took < 10,
   "R-LANE-4 the lane waited until the budget less 5 s ($took s)");

my $seen = $wall->requests;
ok(@$seen >= 3, 'R-LANE-4 the wall, then retries in the lane');
is(scalar(grep { ($_->{headers}{'anthropic-usage-limit'} // '') eq 'slow' }
          @$seen), @$seen - 1, 'R-LANE-4 every retry carried the header');

$r = $t->get($gw, '/ops/api/resilience/cooldowns',
             Authorization => "Bearer $TOKEN");
my ($c) = grep { $_->{id} eq 'cb' } @{OmniTest::json($r)->{connections}};
is($c->{lane}{phase}, 'ended', 'R-LANE-4 the lane ended');
is($c->{lane}{end}, 'max_wait', 'R-LANE-4 as max_wait');
ok(abs($c->{lane}{blocked_until} / 1000 - (time + 600)) < 15,
   'R-LANE-4 a 10-minute cool-off');
ok($c->{lane}{waits} >= 1, 'R-LANE-4 waits counted');

$r = $t->get($gw, '/ops/metrics', Authorization => "Bearer $TOKEN");
like($r->{body}, qr/^omniroute_lane_ends_total\{state="max_wait"\} 1$/m,
     'R-LANE-9 the end counted');

$wall->stop;
$t->done;
done_testing();
