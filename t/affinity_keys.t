#!/usr/bin/perl

# R-AFF-2: session pins are the client key's.  Two keys sending the same
# X-Session-Id are pinned each on its own: a tenant who learns another's
# session id cannot steer that tenant's requests, nor be steered by them.
# Also (R-LEASE-1, docs/security.md) an Authorization that is not a Bearer
# token is refused 401 even beside a valid x-api-key.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $KA = 'sk-tenant-a-0123456789abcdef';
my $KB = 'sk-tenant-b-0123456789abcdef';

$t->write_file("key-$_", "sk-$_\n") for qw(c1 c2 c3);
$t->write_file('ka', "$KA\n");
$t->write_file('kb', "$KB\n");

$t->config(<<'EOF2', workers => 2);
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key-c1;
    omniroute_connection c2 provider=p key_file=%%TESTDIR%%/key-c2;
    omniroute_connection c3 provider=p key_file=%%TESTDIR%%/key-c3;

    omniroute_combo rr strategy=round-robin p/m;

    omniroute_client_key ka file=%%TESTDIR%%/ka;
    omniroute_client_key kb file=%%TESTDIR%%/kb;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

        location /v1/ {
            omniroute_pass;
            omniroute_session_affinity 1h;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub conn {
    my ($key, $sess) = @_;
    my $r = $t->post($gw, '/v1/chat/completions', { model => 'rr' },
                     Authorization => "Bearer $key",
                     $sess ? ('X-Session-Id' => $sess) : ());
    return $r->{headers}{'x-omniroute-connection'} // "status $r->{status}";
}

# tenant A pins its session; tenant B, same id, is not steered to A's
# connection: B's requests get a pin of their own, wherever rotation puts
# them.  Over several session ids, B's pin differs from A's at least once
# (with one shared pin they would always be equal).

my ($same, $differ) = (0, 0);

for my $s (map { "shared-session-$_" } 1 .. 6) {
    my $a = conn($KA, $s);
    # the round robin moves on, so B's first request lands elsewhere
    conn($KB);
    my $b = conn($KB, $s);

    is(conn($KA, $s), $a, "R-AFF-2 $s: A stays on its pin");
    is(conn($KB, $s), $b, "R-AFF-2 $s: B stays on its own pin");

    $a eq $b ? $same++ : $differ++;
}

cmp_ok($differ, '>', 0, 'R-AFF-2 the same session id of two keys: two '
       . "pins ($differ of 6 differ)");

###########################################################################
# Basic beside a valid x-api-key: 401, as docs/security.md says

$m->clear;

my $r = $t->post($gw, '/v1/chat/completions', { model => 'rr' },
                 Authorization => 'Basic dXNlcjpwYXNz', 'x-api-key' => $KA);
is($r->{status}, 401, 'R-LEASE-1 Basic with a valid x-api-key: 401');
is((OmniTest::json($r) || {})->{error}{code}, 'invalid_api_key',
   '... invalid_api_key');
like($r->{headers}{'www-authenticate'} // '', qr/^Bearer/,
     '... WWW-Authenticate: Bearer');

$r = $t->post($gw, '/v1/chat/completions', { model => 'rr' },
              'x-api-key' => $KA);
is($r->{status}, 200, 'the x-api-key alone: 200');
is(scalar @{$m->requests}, 1, 'the provider saw only that one');

$t->done;

done_testing;
