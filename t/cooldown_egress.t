#!/usr/bin/perl

# R-CLASS-6: on an egress-bucketed provider a 429 cools every connection
# sharing the failing one's egress key, except disable_cooling ones; a
# connection cooled during a request is skipped by its fallback.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-x1', "sk-x1~status=429,retry=30\n");
$t->write_file("key-$_", "sk-$_\n") for qw(x2 x3 x4);

$t->config(<<'EOF2');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider oc url=http://127.0.0.1:%%PORT_mock_p%%/v1
                       catalog=opencode;

    omniroute_connection x1 provider=oc key_file=%%TESTDIR%%/key-x1
                         egress=10.0.0.1 priority=1;
    omniroute_connection x2 provider=oc key_file=%%TESTDIR%%/key-x2
                         egress=10.0.0.1 priority=2;
    omniroute_connection x4 provider=oc key_file=%%TESTDIR%%/key-x4
                         egress=10.0.0.1 disable_cooling=on priority=3;
    omniroute_connection x3 provider=oc key_file=%%TESTDIR%%/key-x3
                         egress=10.0.0.2 priority=4;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
            omniroute_max_attempts 4;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');

my $r = $t->post($gw, '/v1/chat/completions', { model => 'oc/m' });
is($r->{status}, 200, 'the request is served');
is($r->{headers}{'x-omniroute-connection'}, 'x4',
   'R-CLASS-6 x2 (same egress) was cooled with x1 and skipped; '
   . 'x4 (disable_cooling) was not');
my @keys = map { $_->{headers}{authorization} } @{$m->requests};
is_deeply(\@keys, ['Bearer sk-x1~status=429,retry=30', 'Bearer sk-x4'],
          'the provider saw x1 then x4, never x2');
like($t->error_log, qr/connection "x2" cooled with "x1" \(egress "10\.0\.0\.1"\)/,
     'the sibling cooling is logged');

$r = $t->post($gw, '/v1/chat/completions', { model => 'oc/m' });
is($r->{headers}{'x-omniroute-connection'}, 'x4',
   'the next request skips x1 and x2 at planning');
is($r->{headers}{'x-omniroute-attempts'}, '1', 'in one attempt');

$t->done;
done_testing;
