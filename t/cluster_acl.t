#!/usr/bin/perl

# Redis as production runs it (issue 28): an ACL user (omniroute_redis
# user= with password_file=, "AUTH user password") for the mirror and
# the leases of every worker; a wrong password keeps both links down with
# a clear log line that never shows a password; configuration errors fail
# nginx -t.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;
use OmniCluster qw(gw server_block wait_for);

OmniTest::need(RedisServer::available(), 'redis-server not installed');

my $PASSWORD = 'acl-pw-Kq27vX0';
my $WRONG = 'wrong-pw-Zz81q';

my $LK = 'sk-lease-key-acl-0123456789';

my ($na, $redis, $nb, $m) = OmniCluster::pair(
    redis => { user => 'omni', password => $PASSWORD },
    files => { 'key-a1' => "sk-up-a1\n", 'key-a2' => "sk-up-a2\n",
               lk => "$LK\n" });

$na->write_file('redis.pw', "$PASSWORD\n");
$nb->write_file('redis.pw', "$WRONG\n");

sub node_config {
    my ($n, $name, $redis_args) = @_;

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis $redis_args node=$name prefix=t28a: timeout=1s
                    backoff=20ms backoff_max=200ms log_interval=60s;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a2;

    omniroute_client_key lk file=%%TESTDIR%%/lk connections=a1,a2
                         scope=lease:exclusive;

${\ server_block(gateway => 0, leases => 1, link => 1, stats => 1)}
EOF
}

sub lease { OmniCluster::lease($_[0], $LK, $_[1]) }

# configuration errors: nginx -t names them

for my $case (
    [ 'user=omni', 'requires "password_file=" \(or "password="\)',
      'user= without a password' ],
    [ "user=om\x01ni password_file=%%TESTDIR%%/redis.pw",
      'invalid parameter "user=', 'a user name with a control byte' ],
    [ 'user= password_file=%%TESTDIR%%/redis.pw',
      'invalid parameter "user="', 'an empty user name' ],
) {
    my ($args, $re, $what) = @$case;
    node_config($na, 'node-a', $redis->addr . " $args");
    my ($rc, $out) = $na->test_config;
    ok($rc != 0 && $out =~ /$re/, "nginx -t refuses $what")
        or diag($out);
}

node_config($na, 'node-a',
            $redis->addr . ' user=omni password_file=%%TESTDIR%%/redis.pw');
node_config($nb, 'node-b',
            $redis->addr . ' user=omni password_file=%%TESTDIR%%/redis.pw');

my ($rc, $out) = $na->test_config;
is($rc, 0, 'nginx -t accepts user= with password_file=') or diag($out);

$na->run(gw($na));

# the right password: the mirror and every worker's lease link, as omni

ok(wait_for(sub { $na->get(gw($na), '/link')->{body} eq 'up' }),
   'node A: the mirror link is up as ACL user "omni"');

my $r;
ok(wait_for(sub { ($r = lease($na, { action => 'acquire' }))->{status}
                  == 200 }),
   'node A: a lease acquire runs its script in Redis');
ok($redis->cmd('EXISTS', 't28a:lease:conn:' . $r->{doc}{lease}{connection}),
   'the lease is in Redis');

my $clients = $redis->cmd('CLIENT', 'LIST') // '';
my $omni = () = $clients =~ /\buser=omni\b/g;
cmp_ok($omni, '>=', 4, "connections authenticated as omni: $omni "
                       . '(mirror command and subscriber, leases of 2 '
                       . 'workers, their subscriber)');
unlike($clients, qr/\buser=default\b/, 'none as the default user');

# the wrong password: both links down, clear log line, no password

$nb->run(gw($nb));

ok(wait_for(sub { $nb->error_log =~ /node "node-b": AUTH failed: WRONGPASS/ }),
   'node B: the wrong password is logged (AUTH failed: WRONGPASS)');
ok(wait_for(sub { $nb->error_log =~ /leases: AUTH failed: WRONGPASS/ }),
   'node B: ... by the leases too');
ok(wait_for(sub { $nb->error_log
                  =~ /client key budgets: AUTH failed: WRONGPASS/ }),
   'node B: ... and by the client key budgets');

$r = lease($nb, { action => 'acquire' });
is($r->{status}, 503, 'node B: a lease call is refused');
is($r->{doc}{error}{code}, 'lease_backend_unavailable',
   '... lease_backend_unavailable');
isnt($nb->get(gw($nb), '/link')->{body}, 'up', 'node B: the mirror is not up');

for my $n ($na, $nb) {
    my $log = $n->error_log;
    unlike($log, qr/\Q$PASSWORD\E|\Q$WRONG\E/,
           'no password in ' . ($n == $na ? 'node A' : 'node B') . "'s log");
}

sub failures {
    my $s = OmniTest::json($nb->get(gw($nb), '/stats')) || {};
    return $s->{failures} // 0;
}

ok(wait_for(sub { failures() >= 3 }),
   'node B: the mirror retries (' . failures() . ' failures)');
my @l = grep { /AUTH failed/ && !/leases:|client key budgets:/ }
        split /\n/, $nb->error_log;
is(scalar(@l), 1, 'the mirror logs it once per log_interval');

$nb->done;
$na->done;
$redis->stop;

done_testing();
