#!/usr/bin/perl

# R-REQ-4: connect errors, resets and timeouts fall over in the same
# client request (a read timeout after the provider got the request only
# with omniroute_resend_after_timeout on); the attempt limit; a JSON
# 502/504 when no provider answered at all.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-reset', "sk-reset~reset\n");
$t->write_file('key-hang', "sk-hang~hang\n");
$t->write_file('key-ok', "sk-ok\n");
$t->write_file('key-503', "sk-503~status=503\n");

# a port nothing listens on
my $dead = $t->port('dead');

# omniroute_params with a read timeout of 1 s
$t->params_with('params-1s', proxy_read_timeout => '1s');

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider dead url=http://127.0.0.1:%%PORT_dead%%/v1;
    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;

    omniroute_connection d1 provider=dead key_file=%%TESTDIR%%/key-ok;
    omniroute_connection reset provider=p key_file=%%TESTDIR%%/key-reset
                         priority=1;
    omniroute_connection hang provider=p key_file=%%TESTDIR%%/key-hang
                         priority=2;
    omniroute_connection ok provider=p key_file=%%TESTDIR%%/key-ok
                         priority=3;
    omniroute_connection e503 provider=p key_file=%%TESTDIR%%/key-503
                         priority=4;

    omniroute_combo chain dead/m p/m;
    omniroute_model deadonly dead/m;

    omniroute_resend_after_timeout on;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
            omniroute_max_attempts 4;
        }

        location /limited/ {
            omniroute_pass /_omniroute;
            omniroute_max_attempts 2;
        }

        location /_omniroute {
            internal;
            include %%TESTDIR%%/params-1s;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');

my $r = $t->post($gw, '/v1/chat/completions', { model => 'chain' });
is($r->{status}, 200,
   'R-REQ-4 refused, reset and timed-out attempts fall over to success');
is($r->{headers}{'x-omniroute-attempts'}, '4', 'after four attempts');
is($r->{headers}{'x-omniroute-connection'}, 'ok', 'answered by "ok"');

my @keys = map { $_->{headers}{authorization} } @{$m->requests};
is_deeply(\@keys, ['Bearer sk-reset~reset', 'Bearer sk-hang~hang',
                   'Bearer sk-ok'],
          'the provider saw reset, hang, then ok (dead was refused)');

# the attempt limit stops the loop: refused, reset, then give up (fresh
# state: the failures above put those connections in cooldown)
$t->restart($t->port('gw'));
$m->clear;
$r = $t->post($gw, '/limited/chat/completions', { model => 'chain' });
is($r->{status}, 502, 'R-REQ-4 omniroute_max_attempts 2 stops after two');
is($r->{headers}{'x-omniroute-attempts'}, '2', 'X-OmniRoute-Attempts 2');
is(OmniTest::json($r)->{error}{code}, 'upstream_unavailable',
   'a JSON error names the transport failure');
is(scalar @{$m->requests}, 1, 'the mock saw only the reset attempt');

# nothing reachable at all
$t->restart($t->port('gw'));
$r = $t->post($gw, '/v1/chat/completions', { model => 'deadonly' });
is($r->{status}, 502, 'a single refused connection: 502');
is(OmniTest::json($r)->{error}{code}, 'upstream_unavailable',
   'code upstream_unavailable');
is($r->{headers}{'x-omniroute-connection'}, 'd1', 'naming the connection');

# a timeout as the last attempt is a 504
$t->restart($t->port('gw'));
$m->set_behavior('hang');
$m->clear;
$r = $t->post($gw, '/limited/chat/completions', { model => 'p/m' });
is($r->{status}, 504, 'timeouts on every attempt: 504');
is(OmniTest::json($r)->{error}{code}, 'upstream_timeout',
   'code upstream_timeout');
is(scalar @{$m->requests}, 2, 'after two attempts');

$t->done;
done_testing;
