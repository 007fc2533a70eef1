#!/usr/bin/perl

# R-LANE-4, a 529 in the usage-limit lane: the request waits the server's
# anthropic-ratelimit-unified-slow-retry-after (a 1 s hint is clamped up
# to 5 s, then jittered by 30 %: 3.5 - 6.5 s, not the 20 s default) and
# tries the same connection again with "anthropic-usage-limit: slow"; the
# wait is bounded by the request budget less 5 s: a budget shorter than
# the wait ends the lane as max_wait (a cool-off) and the request falls
# over to the next connection.  Mock: t/lib/WallMock.pm (times=1: one
# 529, then the lane answers).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep time);
use OmniTest;
use WallMock;

my $TOKEN = 'lane-529-0123456789-abc';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $t = OmniTest->new;
my $ok = $t->mock('ok');
my $wall = WallMock->new(port => $t->port('mock_wall'),
                         log => $t->dir . '/wall.log');
$wall->start;

$t->write_file('key', "sk-ant-oat01-secret\n");
$t->write_file('key-ok', "sk-ok\n");

$t->config(<<'EOF', main => 'env OMNI_TEST_API_TOKEN;');
    omniroute_zone zone=omniroute:1m;

    # one 529 in the lane with a 1 s slow-retry-after, then 200
    omniroute_provider p1
        url=http://127.0.0.1:%%PORT_mock_wall%%/m/slow=529,retry=1,times=1/v1
        kind=oauth auth=x-api-key;
    # 529 in the lane, asking for 30 s
    omniroute_provider p2
        url=http://127.0.0.1:%%PORT_mock_wall%%/m/slow=529,retry=30/v1
        kind=oauth auth=x-api-key;
    omniroute_provider pok url=http://127.0.0.1:%%PORT_mock_ok%%/v1;

    omniroute_connection c1 provider=p1 key_file=%%TESTDIR%%/key
                         usage_lane=on;
    omniroute_connection c2 provider=p2 key_file=%%TESTDIR%%/key
                         usage_lane=on;
    omniroute_connection cok provider=pok key_file=%%TESTDIR%%/key-ok;

    omniroute_combo one wait=off p1/claude pok/claude;
    omniroute_combo two wait=off p2/claude pok/claude;

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

sub ask {
    my ($model) = @_;
    return $t->post($gw, '/v1/messages',
                    { model => $model, max_tokens => 64,
                      messages => [{ role => 'user', content => 'hi' }] });
}

sub api {
    my ($method, $path, $body) = @_;
    my %h = (Authorization => "Bearer $TOKEN");
    if (defined $body) {
        $body = encode_json($body);
        $h{'Content-Type'} = 'application/json';
    }
    my $r = $t->http($gw, OmniTest::request_text($method, "/ops$path", $body,
                                                 %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub lane_of {
    my ($id) = @_;
    my ($c) = grep { $_->{id} eq $id }
              @{api('GET', '/api/resilience/cooldowns')->{json}{connections}};
    return $c->{lane};
}

sub slow { ($_[0]{headers}{'anthropic-usage-limit'} // '') eq 'slow' }

sub reqs {
    my ($re) = @_;
    return [grep { $_->{path} =~ $re } @{$wall->requests}];
}

# 1. a 529 in the lane: wait the (clamped) slow-retry-after, then the same
#    connection again, in the lane

my $t0 = time;
my $r = ask('one');
my $took = time - $t0;

is($r->{status}, 200, 'R-LANE-4 529 in the lane: answered');
is($r->{headers}{'x-omniroute-connection'}, 'c1',
   'R-LANE-4 by the same connection, after the wait');

my $seen = reqs(qr{^/m/slow=529,retry=1,});
is(scalar @$seen, 3, 'R-LANE-4 the wall, the 529, the retry');
ok(!slow($seen->[0]) && slow($seen->[1]) && slow($seen->[2]),
   'R-LANE-4 the 529 and the retry both carried the slow header');

my $gap = @$seen == 3 ? $seen->[2]{time} - $seen->[1]{time} : 0;
ok($gap >= 3.4 && $gap <= 6.7,
   sprintf('R-LANE-4 the 1 s slow-retry-after was clamped to 5 s '
           . '(+-30 %%): waited %.2f s', $gap));
cmp_ok($took, '<', 8, 'R-LANE-4 ... and no longer');
is(scalar @{$ok->requests}, 0, 'R-LANE-4 no fallback');

like($t->error_log,
     qr/lane of connection "c1" is busy, retrying in (3[5-9]\d\d|[45]\d\d\d|6[0-4]\d\d|6500) ms/,
     'R-LANE-9 the wait is logged with its length');

my $l = lane_of('c1');
is($l->{phase}, 'active', 'R-LANE-4 the lane goes on');
is($l->{waits}, 1, 'R-LANE-9 one wait counted');

# 2. a request budget shorter than the wait: the wait is cut to the budget
#    less 5 s, then the lane ends as max_wait and the request falls over

$r = api('PATCH', '/api/resilience', { global => { request => {
         budget_ms => 7000 } } });
is($r->{status}, 200, 'request.budget_ms is 7 s');

$wall->clear;
$t0 = time;
$r = ask('two');
$took = time - $t0;

is($r->{status}, 200, 'R-LANE-4 budget shorter than the wait: answered');
is($r->{headers}{'x-omniroute-connection'}, 'cok',
   'R-LANE-4 by the next connection');
ok($took > 1.5 && $took < 4.5,
   sprintf('R-LANE-4 the 30 s wait was cut to the budget less 5 s '
           . '(%.2f s)', $took));

$seen = reqs(qr{^/m/slow=529,retry=30/});
is(scalar @$seen, 3, 'R-LANE-4 the wall, the 529, one retry in the lane');
ok(slow($seen->[1]) && slow($seen->[2]),
   'R-LANE-4 both in the lane');
like($t->error_log, qr/lane of connection "c2" is busy, retrying in (1[5-9]\d\d|20\d\d) ms/,
     'R-LANE-4 the logged wait is the budget less 5 s, not 30 s');

$l = lane_of('c2');
is($l->{phase}, 'ended', 'R-LANE-4 the lane ended');
is($l->{end}, 'max_wait', 'R-LANE-4 as max_wait');
ok(abs(($l->{blocked_until} // 0) / 1000 - (time + 600)) < 15,
   'R-LANE-4 with the 10-minute cool-off');

$r = api('GET', '/metrics');
like($r->{body}, qr/^omniroute_lane_ends_total\{state="max_wait"\} 1$/m,
     'R-LANE-9 the end counted');

unlike($t->read_file('logs/error.log'), qr/sk-ant-oat01-secret/,
       'the credential is never logged');

$wall->stop;
$t->done;
done_testing();
