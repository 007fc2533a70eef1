#!/usr/bin/perl

# Lease lines from Redis are untrusted input (issue 23, findings 2 and 4):
# two nodes and a real redis-server; a hostile writer PUBLISHes on the
# leases channel and SETs lease keys.  A line with a version far ahead of
# Redis's clock does not take a connection from its holder; valid-looking
# lines that no key holds (3,000 of them) are never stored; keys for a
# client key or a connection the node does not have, with a generation
# out of range or an expiry past the longest TTL are rejected by the
# loads; a forged end of a lease that Redis still holds changes nothing;
# renew through Redis goes on; 100,000 unreadable messages make a
# bounded number of log lines, with the count of those suppressed, and
# move omniroute_redis_records_rejected_total.

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
my $PLAIN = 'sk-plain-key-000-0123456789';

my ($na, $redis, $nb, $m) = OmniCluster::pair(
    files => { 'key-a1' => "sk-up-a1\n", 'key-a2' => "sk-up-a2\n",
               lk => "$LK\n", plain => "$PLAIN\n" });

sub node_config {
    my ($n, $name) = @_;
    OmniCluster::node_config($n, addr => $redis->addr, name => $name,
        prefix => 't47:', redis_opts => 'resync=1s log_interval=2s',
        body => OmniCluster::lease_body(),
        server => { leases => 1, api => 'admin' });
}

my $LEASES = $OmniCluster::LEASES;
my $NOBODY = $OmniCluster::NOBODY;

sub lease_up { OmniCluster::lease_up($_[0], $LK) }
sub redis_now { OmniCluster::redis_now($redis) }
sub line { OmniCluster::lease_line($redis, @_) }

my $CH = 't47:leases:0';

OmniCluster::start_nodes(\&node_config, $na => 'node-a', $nb => 'node-b');

ok(lease_up($na) && lease_up($nb), 'both nodes: lease calls reach Redis');

my $r = lease($na, $LK, { action => 'acquire' });
is($r->{status}, 200, 'A: acquire');
my $OWNER = $r->{doc}{lease}{owner};
my $HASH = sha256_hex($OWNER);
is($r->{doc}{lease}{connection}, 'a1', 'on a1');

ok(wait_for(sub { infer($nb, $LK, $OWNER, 1)->{status} == 200 }),
   'B: the owner is served');
my $r0 = rejected($nb);

###########################################################################
# finding 2: a forged PUBLISH with a version of 9e18 takes nothing

$redis->cmd('PUBLISH', $CH, line(conn => 'a1',
                                 ver => '9000000000000000000'));
$redis->cmd('PUBLISH', $CH, line(conn => 'a1',
                                 ver => redis_now() * 1000 + 3_600_000_000));
ok(wait_for(sub { rejected($nb) >= $r0 + 2 }),
   'B rejects a version past 16 digits and one an hour ahead of Redis');
is(infer($nb, $LK, $OWNER, 1)->{status}, 200,
   'B: the holder keeps a1 (no 409 lease_lost)');
is(infer($na, $LK, $OWNER, 1)->{status}, 200, 'A too');

# a valid-looking line that no key holds: a hint, read again, not applied

$redis->cmd('PUBLISH', $CH, line(conn => 'a2'));
sleep(0.3);                    # nothing to wait for: nothing must happen
is(conn_of(infer($nb, $PLAIN)), 'a2',
   'B: a forged lease on a2 that Redis does not hold holds nothing');
is(leases_count($nb), 1, 'B lists the one real lease');

# a forged end of the real lease, Redis still holding it

$redis->cmd('PUBLISH', $CH, line(owner => $HASH, conn => 'a1', state => 2));
sleep(0.3);
is(infer($nb, $LK, $OWNER, 1)->{status}, 200,
   'B: a forged release of a lease Redis holds changes nothing');

# 3,000 valid-looking lines, each a new owner, none in Redis

my $used0 = metric($nb, 'omniroute_zone_records{table="lease"}');
my $script = "for i = 1, 3000 do redis.call('PUBLISH', KEYS[1], "
             . "string.format('1 %064x lk a2 1 %.0f %.0f %.0f %.0f 1', i, "
             . "ARGV[1] * 1000, ARGV[1], ARGV[1], ARGV[1] + 600000)) end "
             . "return 3000";
is($redis->cmd('EVAL', $script, 1, $CH, redis_now()), 3000,
   '3,000 forged lease lines published');
sleep(0.5);
is(leases_count($nb), 1, 'B: still the one real lease');
my $used = metric($nb, 'omniroute_zone_records{table="lease"}');
cmp_ok($used, '<=', $used0,
       "B: the zone holds no lease record of them ($used, $used0 before)");
is(metric($nb, 'omniroute_zone_alloc_failures_total') // 0, 0,
   'no allocation failed');
is(conn_of(infer($nb, $PLAIN)), 'a2', 'B: a2 is free');

# keys a hostile writer SETs: read by the loads (resync=1s), rejected

$r0 = rejected($na);
my $now = redis_now();
$redis->cmd('SET', 't47:lease:conn:a2', line(key => 'nosuchkey'));
$redis->cmd('SET', 't47:lease:owner:' . sha256_hex('x1'),
            line(owner => sha256_hex('x1'), conn => 'nosuchconn'));
$redis->cmd('SET', 't47:lease:owner:' . sha256_hex('x2'),
            line(owner => sha256_hex('x2'), key => 'plain'));
$redis->cmd('SET', 't47:lease:owner:' . sha256_hex('x3'),
            line(owner => sha256_hex('x3'), gen => '9007199254740992'));
$redis->cmd('SET', 't47:lease:owner:' . sha256_hex('x4'),
            line(owner => sha256_hex('x4'), exp => $now + 7_200_000));
$redis->cmd('SET', 't47:lease:owner:' . sha256_hex('x5'),
            line(owner => sha256_hex('x5'), ver => ($now + 600_000) * 1000));
$redis->cmd('SET', 't47:lease:owner:' . sha256_hex('x6'), 'garbage');
$redis->cmd('SET', 't47:lease:seq', $now * 1000);

ok(wait_for(sub { rejected($na) >= $r0 + 7 }),
   'A rejects the seven keys at a load (' . (rejected($na) - $r0) . ')');
is(leases_count($na), 1, 'A: the one real lease');
is(conn_of(infer($na, $PLAIN)), 'a2',
   'A: a2 is free (a key of an unknown client key holds nothing)');
$redis->cmd('DEL', 't47:lease:conn:a2', map { 't47:lease:owner:'
                                                 . sha256_hex("x$_") } 1 .. 6);

# renew through Redis goes on, and both nodes agree

$r = lease($nb, $LK, { action => 'renew', owner => $OWNER, generation => 1 });
is($r->{status}, 200, 'B: renew through Redis');
is(infer($na, $LK, $OWNER, 1)->{status}, 200, 'A serves the owner');
is(infer($nb, $LK, $OWNER, 1)->{status}, 200, 'and so does B');

###########################################################################
# finding 4: 100,000 unreadable messages, a bounded log

my $t0 = time;
my $before = () = $nb->error_log =~ /leases?: (?:rejected a lease line|a lease that cannot be read)/g;
$r0 = rejected($nb);
is($redis->cmd('EVAL', "for i = 1, 100000 do redis.call('PUBLISH', KEYS[1], "
               . "'garbage ' .. i) end return 1", 1, $CH), 1,
   '100,000 garbage messages published');
ok(wait_for(sub { rejected($nb) >= $r0 + 100_000 }, 30),
   'B counts all of them (' . (rejected($nb) - $r0) . ')');
my $elapsed = time - $t0;
my $LINE = qr/leases?: (?:rejected a lease line|a lease that cannot be read)/;
my @lines = grep { /$LINE/ } split /\n/, $nb->error_log;
my $n = @lines - $before;
cmp_ok($n, '<=', int($elapsed / 2) + 2,
       "at most one line per log_interval ($n lines in "
       . sprintf('%.1f s)', $elapsed));

# the next interval's first line says how many were left out

my $SUPPRESSED = qr/\[warn\].*leases:[ ]rejected[ ]a[ ]lease[ ]line[ ]from
                    [ ]Redis[ ]\(bad[ ]\w+\);[ ]ignored[ ]\((\d+)[ ]more[ ]such
                    [ ]messages[ ]suppressed\)/x;
my $sum = 0;
ok(wait_for(sub { $redis->cmd('PUBLISH', $CH, 'garbage again');
                  my @l = grep { /$LINE/ } split /\n/, $nb->error_log;
                  splice(@l, 0, $before);
                  $sum = 0;
                  $sum += 1 + (/$SUPPRESSED/ ? $1 : 0) for @l;
                  $sum >= 100_000 }, 5),
   "the lines count the messages they left out ($sum)");
unlike($nb->error_log, qr/garbage/, 'never the line itself');
is(infer($nb, $LK, $OWNER, 1)->{status}, 200, 'B still serves the owner');

$nb->done;
$na->done;
$redis->stop;

done_testing;
