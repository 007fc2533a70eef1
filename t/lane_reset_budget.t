#!/usr/bin/perl

# R-LANE-7 and the request budget: the session-limit reset's usage probe
# is a subrequest bounded as an attempt is, by what is left of
# request.budget_ms.  A usage endpoint that never answers does not hold
# the client until proxy_read_timeout: the reset counts as failed (with
# its 15-minute backoff) and the request goes on down the normal path, in
# time.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;
use WallMock;

my $TOKEN = 'lane-reset-0123456789';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$ENV{OMNIROUTE_REQUEST_BUDGET_MS} = 2000;

my $t = OmniTest->new;
my $wall = WallMock->new(port => $t->port('mock_wall'),
                         log => $t->dir . '/wall.log', usage => 'hang');
$wall->start;

$t->write_file('key', "sk-ant-oat01-secret\n");

my $main = "env OMNIROUTE_REQUEST_BUDGET_MS;\nenv OMNI_TEST_API_TOKEN;";

$t->config(<<'EOF', main => $main);
    omniroute_zone zone=omniroute:1m;

    omniroute_provider pr
        url=http://127.0.0.1:%%PORT_mock_wall%%/m/reset=3600/v1
        kind=oauth auth=x-api-key;

    omniroute_connection cr provider=pr key_file=%%TESTDIR%%/key
                         limit_reset=on org=0a1b2c3d-0000-4000-8000-aabbcc;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
            proxy_read_timeout 20s;
        }

        location /ops/ {
            omniroute_api prefix=/ops;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

my $body = { model => 'pr/claude', max_tokens => 64,
             messages => [{ role => 'user', content => 'hi' }] };

my $start = time;
my $r = $t->post($gw, '/v1/messages', $body, 'X-Client-Note' => 'private');
my $took = time - $start;

is($r->{status}, 429, 'the wall\'s 429, down the normal path');
cmp_ok($took, '<', 4, "within the request budget, not proxy_read_timeout "
                      . "($took s)");

my @seen = map { $_->{path} } @{$wall->requests};
is_deeply(\@seen, ['/m/reset=3600/v1/messages',
                   '/api/oauth/usage?at_wall=1&skip_spend=1'],
          'the wall, then the usage probe (no claim)')
    or diag("@seen");

my $probe = $wall->requests->[1]{headers};
is($probe->{'x-api-key'}, 'sk-ant-oat01-secret',
   'the probe carries the connection\'s credential');
ok(!exists $probe->{'x-client-note'}, '... and none of the client\'s headers');
is($wall->requests->[0]{headers}{'x-client-note'}, 'private',
   '(the attempt itself passes them on)');

like($t->error_log,
     qr/session-limit reset of connection "cr": the usage probe got no answer in time/,
     'the probe\'s end is logged');
like($t->error_log, qr/session-limit reset of connection "cr": failed/,
     'the reset counts as failed');

$r = $t->get($gw, '/ops/metrics', Authorization => "Bearer $TOKEN");
like($r->{body}, qr/^omniroute_limit_resets_total\{result="failed"\} 1$/m,
     'omniroute_limit_resets_total{result="failed"}');

$wall->stop;
$t->done;
done_testing();
