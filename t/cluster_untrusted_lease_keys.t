#!/usr/bin/perl

# Garbage lease keys do not stop leases (issue 23, finding 5): two nodes,
# a real redis-server.  A lease:seq that is not a number or is far ahead
# of Redis's clock, a lease:conn:* of the wrong type or holding garbage,
# a lease:owner:* of the wrong type: acquires go on (the script takes
# them for no lease and overwrites them), renew of a wrong-type owner key
# is 404, versions stay near Redis's clock, each is counted in
# omniroute_redis_records_rejected_total and logged at most once per
# log_interval.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Digest::SHA qw(sha256_hex);
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;
use OmniCluster qw(gw wait_for lease infer conn_of metric
                   rejected leases_count);

OmniTest::need(RedisServer::available(), 'redis-server not installed');

$OmniCluster::API_PREFIX = '/admin';

my $LK = 'sk-lease-key-one-0123456789';
my $LK2 = 'sk-lease-key-two-0123456789';
my $PLAIN = 'sk-plain-key-000-0123456789';

my ($na, $redis, $nb, $m) = OmniCluster::pair(
    files => { 'key-a1' => "sk-up-a1\n", 'key-a2' => "sk-up-a2\n",
               lk => "$LK\n", lk2 => "$LK2\n",
               plain => "$PLAIN\n" });

sub node_config {
    my ($n, $name) = @_;
    OmniCluster::node_config($n, addr => $redis->addr, name => $name,
        prefix => 't49:', redis_opts => 'resync=1s log_interval=2s',
        body => OmniCluster::lease_body(lk2 => 1),
        server => { leases => 1, api => 'admin' });
}

my $LEASES = $OmniCluster::LEASES;
my $NOBODY = $OmniCluster::NOBODY;

sub lease_up { OmniCluster::lease_up($_[0], $LK) }
sub redis_now { OmniCluster::redis_now($redis) }
sub line { OmniCluster::lease_line($redis, @_) }



sub field { (split / /, $_[0] // '')[$_[1]] }

OmniCluster::start_nodes(\&node_config, $na => 'node-a', $nb => 'node-b');

ok(lease_up($na) && lease_up($nb), 'both nodes: lease calls reach Redis');

my $r0 = rejected($na);
my $t0 = time;

# lease:seq garbage

$redis->cmd('SET', 't49:lease:seq', 'not a number');
my $r = lease($na, $LK, { action => 'acquire' });
is($r->{status}, 200, 'a garbage lease:seq: the acquire goes on')
    or diag($r->{body});
my $OWNER = $r->{doc}{lease}{owner};
like($redis->cmd('GET', 't49:lease:seq') // '', qr/^\d{16}$/,
     'lease:seq repaired');

# lease:seq far ahead of Redis's clock: versions stay near TIME

$redis->cmd('SET', 't49:lease:seq', '9000000000000000');
$r = lease($nb, $LK, { action => 'renew', owner => $OWNER,
                       generation => 1 });
is($r->{status}, 200, 'a lease:seq far ahead: renew goes on');
my $v = field($redis->cmd('GET', 't49:lease:owner:' . sha256_hex($OWNER)),
              5);
cmp_ok($v, '<=', (redis_now() + 1000) * 1000,
       "the version stays at Redis's clock ($v)");
is(infer($na, $LK, $OWNER, 1)->{status}, 200,
   'A takes the renewed lease (its version is not refused)');

# lease:conn:a2 of the wrong type, then garbage

$redis->cmd('DEL', 't49:lease:conn:a2');
$redis->cmd('LPUSH', 't49:lease:conn:a2', 'x');
$r = lease($na, $LK2, { action => 'acquire' });
is($r->{status}, 200, 'a wrong-type lease:conn:a2: the acquire goes on');
is($r->{doc}{lease}{connection}, 'a2', 'on a2 (the key was no lease)');
is($redis->cmd('TYPE', 't49:lease:conn:a2'), 'string',
   'the key is a lease again');
my $OWNER2 = $r->{doc}{lease}{owner};
is(lease($na, $LK2, { action => 'release', owner => $OWNER2,
                      generation => 1 })->{status}, 200, 'released');

$redis->cmd('SET', 't49:lease:conn:a2', '1 zz lk a2 x y z');
$r = lease($nb, $LK2, { action => 'acquire' });
is($r->{status}, 200, 'a garbage lease:conn:a2: the acquire goes on');
is($r->{doc}{lease}{connection}, 'a2', 'on a2');
$OWNER2 = $r->{doc}{lease}{owner};

# lease:owner of the wrong type: that owner's lease is not found

my $hash2 = sha256_hex($OWNER2);
$redis->cmd('DEL', "t49:lease:owner:$hash2");
$redis->cmd('HSET', "t49:lease:owner:$hash2", 'a', 'b');
$r = lease($nb, $LK2, { action => 'renew', owner => $OWNER2,
                        generation => 1 });
is($r->{status}, 404, 'a wrong-type owner key: renew answers 404, not 503');
$redis->cmd('DEL', "t49:lease:owner:$hash2");

# counted and logged at a bounded rate

ok(wait_for(sub { rejected($na) + rejected($nb) >= $r0 + 4 }),
   'counted in omniroute_redis_records_rejected_total ('
   . (rejected($na) + rejected($nb) - $r0) . ')');
my $elapsed = time - $t0;
for my $n ($na, $nb) {
    my @l = grep { /rejected a lease key from Redis/ }
            split /\n/, $n->error_log;
    ok(@l >= 1 && @l <= int($elapsed / 2) + 1,
       scalar(@l) . ' log line(s) in ' . sprintf('%.1f s', $elapsed));
}

$r = lease($na, $LK, { action => 'acquire' });
is($r->{status}, 429, 'every connection leased: 429 (no 503)');

$nb->done;
$na->done;
$redis->stop;

done_testing;
