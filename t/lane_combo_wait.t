#!/usr/bin/perl

# R-LANE-4: "the lane's retries do not count against
# omniroute_max_attempts" - also when the request then waits for a combo
# target (the combo wait, R-CONC-3): a lane connection meets the wall, retries in the
# lane (not counted), the lane ends (weekly_limit) and the connection
# cools down; the next target answers 429 Retry-After: 1; the combo waits
# for it and tries it again, as it would have without the lane's retry
# (3 attempts: the wall, that 429, the retry after the wait).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;
use WallMock;

my $t = OmniTest->new;
my $m = $t->mock('r');
my $wall = WallMock->new(port => $t->port('mock_wall'),
                         log => $t->dir . '/wall.log');
$wall->start;

$t->write_file('key', "sk-ant-oat01-secret\n");
$t->write_file('key-r', "sk-r\n");

$t->config(<<'EOF2');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider pl
        url=http://127.0.0.1:%%PORT_mock_wall%%/m/slow=weekly_limit/v1
        kind=oauth auth=x-api-key;
    omniroute_provider pr url=http://127.0.0.1:%%PORT_mock_r%%/v1;

    omniroute_connection cl provider=pl key_file=%%TESTDIR%%/key
                         usage_lane=on;
    omniroute_connection cr provider=pr key_file=%%TESTDIR%%/key-r;

    omniroute_combo claude pl/claude pr/claude;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

        location /v1/ {
            omniroute_pass;
            omniroute_attempt_trail on;
            omniroute_max_attempts 3;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');

$m->set_behavior('status=429,retry=1');

my $s = $t->start_post($gw, '/v1/messages',
                       { model => 'claude', max_tokens => 64,
                         messages => [{ role => 'user', content => 'hi' }] });

for (1 .. 300) {
    last if @{$m->requests};
    sleep(0.01);
}
$m->set_behavior('ok');

my $r = OmniTest::finish($s, 10);

my $seen = $wall->requests;
is(scalar @$seen, 2, 'the wall, then the retry in the lane');
is($seen->[1]{headers}{'anthropic-usage-limit'}, 'slow',
   'the lane retry carried the slow header');

is($r->{status}, 200, 'R-LANE-4 the combo waited for cr after the lane')
    or diag("$r->{status} $r->{body} "
            . ($r->{headers}{'x-omniroute-trail'} // ''));
is($r->{headers}{'x-omniroute-connection'}, 'cr', '... and cr answered');
is(scalar @{$m->requests}, 2, 'cr: the 429, then the retry after the wait');
like($r->{headers}{'x-omniroute-trail'} // '',
     qr/^cl;429;\d+ms, cl;429;\d+ms, cr;429;\d+ms, cr;200;\d+ms$/,
     'the trail: wall, lane end, 429, 200');

$wall->stop;
$t->done;
done_testing();
