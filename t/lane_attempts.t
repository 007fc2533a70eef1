#!/usr/bin/perl

# R-LANE-4 and omniroute_max_attempts: the lane's retries do not count
# against the attempt limit, but only a retry that was made counts as
# one.  A lane retry whose connection is no longer admitted (it cooled
# down during the slot_busy wait) is no attempt: the request falls over
# to the next connection and then has exactly the attempts the limit
# gives it, not one more.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;
use WallMock;

my $t = OmniTest->new;
my $bad = $t->mock('bad');
my $ok = $t->mock('ok');
my $wall = WallMock->new(port => $t->port('mock_wall'),
                         log => $t->dir . '/wall.log');
$wall->start;

$t->write_file('key', "sk-ant-oat01-secret\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider pb
        url=http://127.0.0.1:%%PORT_mock_wall%%/m/slow=slot_busy,retry=5/v1
        kind=oauth auth=x-api-key;
    omniroute_provider pbad url=http://127.0.0.1:%%PORT_mock_bad%%/v1;
    omniroute_provider pok url=http://127.0.0.1:%%PORT_mock_ok%%/v1;

    omniroute_connection cb provider=pb key_file=%%TESTDIR%%/key
                         usage_lane=on;
    omniroute_connection cbad provider=pbad key_file=%%TESTDIR%%/key;
    omniroute_connection cok provider=pok key_file=%%TESTDIR%%/key;

    omniroute_combo claude wait=off pb/claude pbad/claude pok/claude;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

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

$bad->set_behavior('status=503');

my $body = { model => 'claude', max_tokens => 64,
             messages => [{ role => 'user', content => 'hi' }] };

my $s = $t->start_post($gw, '/v1/messages', $body);

# the wall, then the lane's first retry: slot_busy, a wait of about 5 s

for (1 .. 300) {
    last if @{$wall->requests} >= 2;
    sleep(0.01);
}

is(scalar @{$wall->requests}, 2, 'the wall, then one retry in the lane');

# meanwhile cb stops answering: another request cools it down

$wall->stop;

my $d = $t->post($gw, '/v1/messages', { %$body, model => 'pb/claude' });
is($d->{status}, 502, 'cb unreachable: it cools down');

my $r = OmniTest::finish($s, 20);

# attempts: the wall (1), the lane's retry (not counted), cbad (2): done

is($r->{status}, 503, 'the lane retry was not made: cbad\'s 503 after '
                      . '2 counted attempts');
is(scalar @{$bad->requests}, 1, 'cbad got the request');
is(scalar @{$ok->requests}, 0,
   'cok got none: no attempt beyond omniroute_max_attempts');
like($t->error_log, qr/low-priority lane of connection "cb" is busy/,
     'the lane waited');

$t->done;
done_testing();
